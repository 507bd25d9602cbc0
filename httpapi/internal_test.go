package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestParseWait(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"", 0, true},
		{"0", 0, true},
		{"30s", 30 * time.Second, true},
		{"1m30s", 90 * time.Second, true},
		{"30", 30 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{"10m", MaxWait, true},
		{"100000", MaxWait, true},
		{"-1s", 0, false},
		{"-2", 0, false},
		{"soon", 0, false},
	} {
		got, err := parseWait(tc.in, MaxWait)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseWait(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// TestEventViewGolden checks the API shape of every event kind against the
// storage JSON of history's golden file: the same fields, timestampMs
// replaced by timestamp, and eventId, type, timestamp first.
func TestEventViewGolden(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../history/testdata/events.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]json.RawMessage
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	for _, kind := range history.EventKinds {
		stored, ok := golden[string(kind)]
		if !ok {
			t.Errorf("golden file has no %s event", kind)
			continue
		}
		ev, err := history.DecodeEvent(stored)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		got, err := json.Marshal(newEventView(&ev))
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		var want, have map[string]any
		if err := json.Unmarshal(stored, &want); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatal(err)
		}
		delete(want, "timestampMs")
		want["timestamp"] = time.UnixMilli(ev.TimestampMs).UTC().Format("2006-01-02T15:04:05.000Z")
		if !reflect.DeepEqual(have, want) {
			t.Errorf("%s:\n got %s\nwant %v", kind, got, want)
		}
		if keys := objectKeys(t, got); !slices.Equal(keys[:3], []string{"eventId", "type", "timestamp"}) {
			t.Errorf("%s: keys start %v", kind, keys[:3])
		}
	}
}

// objectKeys returns the top-level keys of a JSON object in order.
func objectKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

func newTestServer(t *testing.T) *server {
	t.Helper()
	store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h, err := NewHandler(duroxide.NewClient(store), &Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h.(*server)
}

// TestOpenAPIDescribesRoutes checks that the OpenAPI document and the route
// table list the same operations and that every $ref resolves.
func TestOpenAPIDescribesRoutes(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	var doc map[string]any
	if err := json.Unmarshal(openAPIDoc, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.0.") {
		t.Fatalf("openapi version %q", v)
	}
	var documented []string
	for path, item := range doc["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			if method != "parameters" {
				documented = append(documented, strings.ToUpper(method)+" "+path)
			}
		}
	}
	var served []string
	for _, rt := range s.routes {
		served = append(served, rt.pattern)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if !slices.Equal(documented, served) {
		t.Fatalf("OpenAPI operations\n%v\ndiffer from the routes\n%v", documented, served)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !resolves(doc, ref) {
					t.Errorf("$ref %q does not resolve", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

func resolves(doc map[string]any, ref string) bool {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return false
	}
	var cur any = doc
	for _, part := range strings.Split(p, "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[part]; !ok {
			return false
		}
	}
	return true
}

func TestPanicBecomesJSON500(t *testing.T) {
	t.Parallel()
	s := newTestServer(t)
	h := s.adapt(func(http.ResponseWriter, *http.Request) error { panic("kaboom") })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusInternalServerError || body.Details != "" || strings.Contains(rec.Body.String(), "kaboom") ||
		body.RequestID == "" || rec.Header().Get(headerRequestID) != body.RequestID ||
		rec.Header().Get("Content-Type") != contentTypeJSON {
		t.Fatalf("got %d %s %v", rec.Code, rec.Body, rec.Header())
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{duroxide.ErrInvalidArgument, http.StatusBadRequest},
		{duroxide.ErrNotFound, http.StatusNotFound},
		{duroxide.ErrInstanceExists, http.StatusConflict},
		{&duroxide.DuplicateStartError{InstanceID: "a", IdempotencyKey: "k"}, http.StatusConflict},
		{duroxide.ErrStillRunning, http.StatusConflict},
		{duroxide.ErrChildInstance, http.StatusConflict},
		{&http.MaxBytesError{Limit: 1}, http.StatusRequestEntityTooLarge},
		{context.DeadlineExceeded, http.StatusInternalServerError},
	} {
		if got, msg := classify(tc.err); got != tc.want || msg == "" {
			t.Errorf("classify(%v) = %d %q, want %d", tc.err, got, msg, tc.want)
		}
	}
}

func TestLoneSurrogate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		json string
		want int
	}{
		{`{"id": "abc"}`, -1},
		{`{"id": "\ud83d\ude00"}`, -1}, // a pair: 😀
		{`{"id": "\uD83D\uDE00"}`, -1},
		{`{"id": "\u00e9\n\\ud800"}`, -1}, // an escaped backslash, then text
		{`{"id": "\ud800"}`, 8},
		{`{"id": "x\udc00"}`, 9},
		{`{"id": "\ud800\u0041"}`, 8},
		{`{"id": "\ud800\ud800"}`, 8},
		{`{"id": "\\\ud800"}`, 10},
		{`{"id": "\ud800`, 8},
	} {
		if got := loneSurrogate([]byte(tc.json)); got != tc.want {
			t.Errorf("loneSurrogate(%s) = %d, want %d", tc.json, got, tc.want)
		}
	}
}
