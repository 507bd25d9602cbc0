package sqlstore

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/duroxide/duroxide-go/provider"
)

func TestMigrationsInVersionOrder(t *testing.T) {
	t.Parallel()
	fsys := fstest.MapFS{
		"m/0010_later.sql": {Data: []byte("B")},
		"m/0002_first.sql": {Data: []byte("A")},
	}
	ms, err := Migrations(fsys, "m", "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0] != (Migration{2, "0002_first", "A"}) || ms[1] != (Migration{10, "0010_later", "B"}) {
		t.Fatalf("Migrations = %+v", ms)
	}
}

func TestMigrationsRefuseBadSets(t *testing.T) {
	t.Parallel()
	for name, files := range map[string][]string{
		"no number":         {"init.sql"},
		"version 0":         {"0000_zero.sql"},
		"not sql":           {"0001_a.txt"},
		"duplicate version": {"0001_a.sql", "01_b.sql"},
		"empty":             nil,
	} {
		fsys := fstest.MapFS{"m": {Mode: fs.ModeDir}}
		for _, f := range files {
			fsys["m/"+f] = &fstest.MapFile{Data: []byte("x")}
		}
		_, err := Migrations(fsys, "m", "test")
		if err == nil || !strings.HasPrefix(err.Error(), "test: ") {
			t.Errorf("%s: Migrations error = %v, want one naming the store", name, err)
		}
	}
}

func TestClassifiedPassesTranslatedErrors(t *testing.T) {
	t.Parallel()
	raw := errors.New("driver says no")
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, true},
		{fmt.Errorf("x: %w", provider.ErrLockLost), true},
		{Translated(provider.ErrBusy, raw), true},
		{fmt.Errorf("wrapped: %w", Translated(provider.ErrBusy, raw)), true},
		{raw, false},
	} {
		if got := Classified(c.err); got != c.want {
			t.Errorf("Classified(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	if err := Translated(provider.ErrBusy, raw); !errors.Is(err, provider.ErrBusy) || !errors.Is(err, raw) {
		t.Fatalf("Translated(ErrBusy, raw) = %v: does not match both", err)
	}
}
