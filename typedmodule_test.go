package duroxide_test

import (
	"context"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTypedFormOutsideTheModule builds and runs testdata/typedmodule, a
// module of its own that imports duroxide through a replace directive, as a
// user's program does: an orchestration in the typed form (typed
// references, CallActivity, CallSubOrchestration, RunTyped) that contains no
// `any`. It needs the go command and the module proxy (or a warm module
// cache); -short skips it.
func TestTypedFormOutsideTheModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a separate module; skipped with -short")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	dir := filepath.Join("testdata", "typedmodule")
	src, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var s scanner.Scanner
	fset := token.NewFileSet()
	s.Init(fset.AddFile("main.go", -1, len(src)), src, nil, 0)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.IDENT && lit == "any" {
			t.Fatalf("%s: the typed-form program uses any", fset.Position(pos))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, "run", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run in %s: %v\n%s", dir, err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "order-1 TEA=300,CAKE=400 total=700"; !strings.HasSuffix(got, want) {
		t.Fatalf("output %q, want it to end with %q", got, want)
	}
}
