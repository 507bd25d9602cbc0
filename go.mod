module github.com/duroxide/duroxide-go

go 1.26
