package sqlstore

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one numbered schema change, embedded by its store.
type Migration struct {
	Version int
	Name    string // the file name without .sql
	SQL     string
}

// Migrations reads the migrations in dir of fsys, in version order. A
// file is named NNNN_description.sql; its version is NNNN, at least 1 and
// unique. store names the store in errors.
func Migrations(fsys fs.FS, dir, store string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 || path.Ext(name) != ".sql" {
			return nil, fmt.Errorf("%s: bad migration file name %q (want NNNN_name.sql, NNNN >= 1)", store, name)
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s: no migrations in %s", store, dir)
	}
	slices.SortFunc(ms, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("%s: two migrations have version %d", store, ms[i].Version)
		}
	}
	return ms, nil
}
