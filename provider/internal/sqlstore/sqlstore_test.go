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

func TestTokensNameWhatTheyLock(t *testing.T) {
	t.Parallel()
	p := NewTokenPrefix()
	if len(p) != tokenPrefixLen || p == NewTokenPrefix() {
		t.Fatalf("NewTokenPrefix = %q: want %d characters, fresh each time", p, tokenPrefixLen)
	}
	if id, ok := TokenInstance(p + "order-42"); !ok || id != "order-42" {
		t.Fatalf("TokenInstance = %q, %v", id, ok)
	}
	if row, ok := TokenRow(p + "17"); !ok || row != 17 {
		t.Fatalf("TokenRow = %d, %v", row, ok)
	}
	for _, bad := range []string{"", p, "x" + p[1:len(p)-1] + "x" + "a", p + "x1"} {
		if _, ok := TokenRow(bad); ok {
			t.Errorf("TokenRow(%q) ok", bad)
		}
	}
	if _, ok := TokenInstance(p[:len(p)-1] + "x" + "a"); ok {
		t.Error("TokenInstance accepted a token without the dot")
	}
}

func TestFailReportsClosedAndTranslates(t *testing.T) {
	t.Parallel()
	raw := errors.New("boom")
	busy := func(err, _ error) error { return Translated(provider.ErrBusy, err) }
	if err := Fail("s", "op", false, nil, busy); err != nil {
		t.Fatalf("Fail(nil) = %v", err)
	}
	if err := Fail("s", "op", true, raw, busy); !errors.Is(err, provider.ErrClosed) || err.Error() != "s: op: "+provider.ErrClosed.Error() {
		t.Fatalf("Fail on a closed store = %v, want ErrClosed", err)
	}
	if err := Fail("s", "op", false, raw, busy); !errors.Is(err, provider.ErrBusy) || !errors.Is(err, raw) {
		t.Fatalf("Fail = %v, want the translated error", err)
	}
}
