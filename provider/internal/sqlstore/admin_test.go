package sqlstore

import (
	"errors"
	"testing"

	"github.com/duroxide/duroxide-go/provider"
)

func TestCheckPurge(t *testing.T) {
	t.Parallel()
	done := string(provider.StatusCompleted)
	running := string(provider.StatusRunning)
	rows := map[string]PurgeRow{
		"root":   {Status: done},
		"child":  {Status: done, Parent: "root", ParentExists: true},
		"orphan": {Status: done, Parent: "gone"},
		"busy":   {Status: running},
		"kid":    {Status: done, Parent: "other", ParentExists: true},
	}
	cases := []struct {
		name  string
		ids   []string
		tree  []string
		force bool
		want  error
	}{
		{"root with its child", []string{"root"}, []string{"root", "child"}, false, nil},
		{"child alone", []string{"child"}, []string{"child"}, false, provider.ErrChildInstance},
		{"child with its parent named", []string{"root", "child"}, []string{"root", "child"}, false, nil},
		{"parent gone", []string{"orphan"}, []string{"orphan"}, false, nil},
		{"parent outside the tree", []string{"kid"}, []string{"kid"}, false, provider.ErrChildInstance},
		{"missing", []string{"nope"}, nil, false, provider.ErrNotFound},
		{"running", []string{"busy"}, []string{"busy"}, false, provider.ErrStillRunning},
		{"running, forced", []string{"busy"}, []string{"busy"}, true, nil},
	}
	for _, c := range cases {
		err := CheckPurge(c.ids, c.tree, rows, c.force)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if err := CheckPurgeArgs([]string{"a", ""}); !errors.Is(err, provider.ErrInvalidArgument) {
		t.Errorf("CheckPurgeArgs with an empty ID = %v, want ErrInvalidArgument", err)
	}
}
