package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := filepath.Join(t.TempDir(), "hello.db")
	// The second run finds the instance the first one finished and prints
	// its stored result.
	for i := 0; i < 2; i++ {
		var out bytes.Buffer
		if err := run(ctx, &out, db, "Ada"); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
		if got, want := out.String(), "Hello, Ada!\n"; got != want {
			t.Fatalf("run %d printed %q, want %q", i+1, got, want)
		}
	}
}

func TestRunInMemory(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, &out, "", "World"); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "Hello, World!\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}
