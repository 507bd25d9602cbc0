package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestREADMEShowsThisProgram: the first Go block under "## Writing
// orchestrations" in README.md is main.go from "package main" on, so the
// program a reader pastes is the one this package compiles.
func TestREADMEShowsThisProgram(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Writing orchestrations\n")
	if !ok {
		t.Fatal(`README.md has no "## Writing orchestrations" section`)
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if !ok {
		t.Fatal("the section has no Go block")
	}
	block, _, ok = strings.Cut(block, "```\n")
	if !ok {
		t.Fatal("the Go block does not end")
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(src), "package main\n")
	if i < 0 {
		t.Fatal("main.go has no package clause")
	}
	if want := string(src[i:]); block != want {
		t.Fatalf("README.md's program differs from internal/readmeexample/main.go:\n--- README\n%s\n--- main.go\n%s", block, want)
	}
}

// TestRun runs the README's program on a store in a temporary directory.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := run(ctx, filepath.Join(t.TempDir(), "app.db"))
	if err != nil || out != "Hello, Ada!" {
		t.Fatalf("run = %q, %v; want Hello, Ada!", out, err)
	}
}
