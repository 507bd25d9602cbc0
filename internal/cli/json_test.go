package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
)

// TestIndentJSON: down to the depth bound, the output is exactly what
// encoding/json indents; below it, values stay compact and the output stays
// the same JSON.
func TestIndentJSON(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`1`, `"x"`, `null`, `{}`, `[]`, `{"a":[]}`, `{"a":{},"b":[1,2,{"c":null}]}`,
		`{"s":"a \"quoted\" {brace} [bracket], colon: \\ backslash \u2028","t":true}`,
		`[[],[[]],{"":""}]`,
		`{"events":[{"eventId":1,"type":"OrchestrationStarted","input":{"k":[1,{"x":"y"}]}}]}`,
	} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(src), "", "  "); err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		if got := indentJSON(nil, []byte(src), jsonIndentDepth); string(got) != want.String() {
			t.Errorf("indentJSON(%s):\n got %s\nwant %s", src, got, want.String())
		}
	}
	deep := strings.Repeat(`{"a":[`, 3000) + `"x"` + strings.Repeat(`]}`, 3000)
	got := indentJSON(nil, []byte(deep), jsonIndentDepth)
	var compact bytes.Buffer
	if err := json.Compact(&compact, got); err != nil || compact.String() != deep {
		t.Fatalf("deep value changed (err %v)", err)
	}
	if limit := (2*jsonIndentDepth + 3) * len(deep); len(got) > limit {
		t.Fatalf("%d bytes of output for %d of input, above %d", len(got), len(deep), limit)
	}
}

// TestJSONOutputOfDeepInput: status --json and history --json of an
// instance whose 60 KB input is nested 9,990 deep print about the input's
// size, not the hundreds of megabytes of full indentation.
func TestJSONOutputOfDeepInput(t *testing.T) {
	t.Parallel()
	const depth = 9990
	input := strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
	db, path := tempDB(t)
	client := startRuntime(t, path)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := client.StartOrchestration(ctx, "deep", demo.Hello, json.RawMessage(input), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := client.WaitForOrchestration(ctx, "deep"); err != nil { // Failed: the input is not a name
		t.Fatal(err)
	}
	limit := 2*len(input) + 16<<10
	for _, args := range [][]string{{"status", "deep", "--json"}, {"history", "deep", "--json"}} {
		r := runCLI(t, append(args, "--db", db)...).wantCode(t, 0)
		if len(r.stdout) > limit {
			t.Fatalf("%v printed %d bytes for a %d-byte input (limit %d)", args, len(r.stdout), len(input), limit)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(r.stdout)); err != nil {
			t.Fatalf("%v: not JSON: %v", args, err)
		}
		if !strings.Contains(compact.String(), input) {
			t.Fatalf("%v: the input is not printed whole", args)
		}
	}
	var st duroxide.Status
	runCLI(t, "status", "deep", "--json", "--db", db).wantCode(t, 0).decode(t, &st)
	if st.InstanceID != "deep" {
		t.Fatalf("status --json decodes to %+v", st)
	}
}
