package cli

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go/internal/storeurl"
)

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// TestNoStoreFilesTracked fails if a file tracked by git is an SQLite
// database, whatever its name: a store written by a test or a bench into
// the source tree must not be committed.
func TestNoStoreFilesTracked(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed: cannot list the tracked files")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout (%v): cannot list the tracked files", err)
	}
	root := strings.TrimSpace(string(top))
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	if len(files) < 10 {
		t.Fatalf("git ls-files listed %d files: %q", len(files), files)
	}
	for _, f := range files {
		if isSQLiteFile(t, filepath.Join(root, f)) {
			t.Errorf("%s is an SQLite database tracked by git: 'git rm --cached' it (and add a .gitignore rule)", f)
		}
	}
}

// isSQLiteFile reports whether path starts with the SQLite header; a
// tracked file deleted from the work tree is not one.
func isSQLiteFile(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return false
		}
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, len(sqliteHeader))
	if _, err := io.ReadFull(f, head); err != nil {
		return false // shorter than the header, or a directory (submodule)
	}
	return bytes.Equal(head, []byte(sqliteHeader))
}

func TestIsSQLiteFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "-fanout")
	if err := os.WriteFile(db, append([]byte(sqliteHeader), make([]byte, 100)...), 0o600); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "README")
	if err := os.WriteFile(text, []byte("SQLite format 3 is described at sqlite.org"), 0o600); err != nil {
		t.Fatal(err)
	}
	if !isSQLiteFile(t, db) {
		t.Fatal("an SQLite header was not recognized")
	}
	if isSQLiteFile(t, text) || isSQLiteFile(t, filepath.Join(dir, "missing")) {
		t.Fatal("a text file or a missing file was taken for an SQLite database")
	}
}

// TestBenchFileStoresNeedAPath: a spec without a file never becomes
// "-WORKLOAD" in the working directory (how bench stores once got
// committed).
func TestBenchFileStoresNeedAPath(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	_, err = fileStores(storeurl.Spec{Kind: storeurl.KindSQLite, Display: "x"}, true, nil)(t.Context(), "fanout")
	if err == nil || !strings.Contains(err.Error(), "names no SQLite file") {
		t.Fatalf("err = %v, want 'names no SQLite file'", err)
	}
	if _, err := os.Stat(filepath.Join(wd, "-fanout")); !os.IsNotExist(err) {
		t.Fatalf("-fanout exists in %s (stat: %v)", wd, err)
	}
}
