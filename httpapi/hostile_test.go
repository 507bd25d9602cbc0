package httpapi_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// maxErrorAnswer bounds the size of any error answer, whatever the request
// held: details quoting the request are capped.
const maxErrorAnswer = 8 << 10

// TestHostileAnswersAreBounded sends what a hostile client would (deeply
// nested, huge, HTML-heavy and invalid text, bidirectional overrides and
// lone surrogates in IDs) and checks the size of every answer in bytes:
// error answers stay under maxErrorAnswer, and answers that carry a stored
// payload grow linearly with it.
func TestHostileAnswersAreBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	start := func(t *testing.T, id, input string) response {
		t.Helper()
		return e.send(t, rawRequest{method: "POST", path: "/api/instances", header: jsonCT,
			body: `{"orchestration": "demo.Hello", "instanceId": "` + id + `", "input": ` + input + `}`})
	}
	bounded := func(t *testing.T, what string, res response, status, limit int) {
		t.Helper()
		if res.status != status {
			t.Fatalf("%s: got %s, want %d", what, clip(res.String()), status)
		}
		if len(res.body) > limit {
			t.Fatalf("%s: the answer has %d bytes, more than %d", what, len(res.body), limit)
		}
	}

	t.Run("deep input", func(t *testing.T) {
		t.Parallel()
		// Just under encoding/json's nesting limit (10,000): accepted, and
		// every answer carrying it stays compact.
		deep := strings.Repeat("[", 9990) + strings.Repeat("]", 9990)
		bounded(t, "start", start(t, "deep", deep), http.StatusCreated, maxErrorAnswer)
		e.wait(t, "deep") // demo.Hello fails: its input is not a string
		limit := 2*len(deep) + 16<<10
		for _, path := range []string{"/api/instances/deep", "/api/instances/deep/history",
			"/api/instances/deep/executions?include=input", "/api/instances?include=input&prefix=deep"} {
			res := e.send(t, rawRequest{method: "GET", path: path})
			bounded(t, path, res, http.StatusOK, limit)
			if !strings.Contains(string(res.body), deep) {
				t.Fatalf("%s: the input is not there, compact", path)
			}
		}
		deeper := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
		bounded(t, "too deep", start(t, "deeper", deeper), http.StatusBadRequest, maxErrorAnswer)
	})

	t.Run("HTML-heavy input", func(t *testing.T) {
		t.Parallel()
		// HTML escaping would write each '<' as \u003c, six times longer.
		// (60 KB: under any payload limit a store may set.)
		input := `"` + strings.Repeat("<", 60<<10) + `"`
		bounded(t, "start", start(t, "html", input), http.StatusCreated, maxErrorAnswer)
		bounded(t, "status", e.send(t, rawRequest{method: "GET", path: "/api/instances/html"}),
			http.StatusOK, len(input)+16<<10)
	})

	for _, tc := range []struct {
		name string
		rr   rawRequest
		want int
	}{
		{"huge unknown field", rawRequest{method: "POST", path: "/api/instances", header: jsonCT,
			body: `{"` + strings.Repeat("f", 900<<10) + `": 1}`}, http.StatusBadRequest},
		{"huge unknown field in a cancel", rawRequest{method: "POST", path: "/api/instances/x/cancel", header: jsonCT,
			body: `{"` + strings.Repeat("<", 900<<10) + `": 1}`}, http.StatusBadRequest},
		{"huge body", rawRequest{method: "POST", path: "/api/instances", header: jsonCT,
			body: `{"input": "` + strings.Repeat("x", 2<<20) + `"}`}, http.StatusRequestEntityTooLarge},
		{"huge invalid UTF-8", rawRequest{method: "POST", path: "/api/instances", header: jsonCT,
			body: `{"orchestration": "demo.Hello", "input": "` + strings.Repeat("\xff", 900<<10) + `"}`}, http.StatusBadRequest},
		{"invalid UTF-8 in a path ID", rawRequest{method: "GET", path: "/api/instances/" + strings.Repeat("%FF", 20<<10)}, http.StatusBadRequest},
		{"long path ID", rawRequest{method: "GET", path: "/api/instances/" + strings.Repeat("x", 60<<10)}, http.StatusBadRequest},
		{"long lock key", rawRequest{method: "GET", path: "/api/workflows/" + strings.Repeat("w", 60<<10) + "/lock"}, http.StatusBadRequest},
		{"long unknown path", rawRequest{method: "GET", path: "/" + strings.Repeat("p", 60<<10)}, http.StatusNotFound},
		{"long Host", rawRequest{method: "GET", path: "/api/instances", host: strings.Repeat("h", 60<<10) + ".example"}, http.StatusForbidden},
		{"long Origin", rawRequest{method: "POST", path: "/api/locks/cleanup",
			header: withHeaders("Origin", "https://"+strings.Repeat("o", 60<<10)+".example")}, http.StatusForbidden},
		{"long Content-Type", rawRequest{method: "POST", path: "/api/instances", body: "{}",
			header: withHeaders("Content-Type", "text/"+strings.Repeat("t", 60<<10))}, http.StatusUnsupportedMediaType},
		{"long webhook trigger", rawRequest{method: "POST", path: "/api/webhooks/" + strings.Repeat("t", 60<<10)}, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bounded(t, tc.name, e.send(t, tc.rr), tc.want, maxErrorAnswer)
		})
	}

	t.Run("lone surrogate in an ID", func(t *testing.T) {
		t.Parallel()
		// encoding/json would store U+FFFD in its place: refused instead.
		bounded(t, "start", start(t, `lone\ud800`, `"x"`), http.StatusBadRequest, maxErrorAnswer)
		bounded(t, "half a pair", start(t, `lone\udc00`, `"x"`), http.StatusBadRequest, maxErrorAnswer)
		bounded(t, "status", e.send(t, rawRequest{method: "GET", path: "/api/instances/" + url.PathEscape("lone\uFFFD")}),
			http.StatusNotFound, maxErrorAnswer)
		bounded(t, "cancel reason", e.send(t, rawRequest{method: "POST", path: "/api/instances/x/cancel", header: jsonCT,
			body: `{"reason": "\ud83d"}`}), http.StatusBadRequest, maxErrorAnswer)
		var page struct {
			Instances []json.RawMessage `json:"instances"`
		}
		e.expect(t, "GET", "/api/instances?prefix=lone", nil, http.StatusOK, &page)
		if len(page.Instances) != 0 {
			t.Fatalf("%d instances with lone surrogates were stored", len(page.Instances))
		}
		// A whole pair is text.
		bounded(t, "pair", start(t, `pair\ud83d\ude00`, `"x"`), http.StatusCreated, maxErrorAnswer)
		var st status
		e.expect(t, "GET", "/api/instances/"+url.PathEscape("pair😀"), nil, http.StatusOK, &st)
	})

	t.Run("right-to-left override in an ID", func(t *testing.T) {
		t.Parallel()
		// U+202E reverses what follows it on screens. Whether the ID rules
		// accept it or not, it is never changed silently: refused, or
		// stored and answered byte for byte.
		id := "invoice\u202Efdp.exe"
		res := start(t, id, `"x"`)
		switch res.status {
		case http.StatusBadRequest:
			bounded(t, "start", res, http.StatusBadRequest, maxErrorAnswer)
		case http.StatusCreated:
			var st status
			res := e.expect(t, "GET", "/api/instances/"+url.PathEscape(id), nil, http.StatusOK, &st)
			if st.InstanceID != id || len(res.body) > maxErrorAnswer {
				t.Fatalf("status of %q: %q in %d bytes", id, st.InstanceID, len(res.body))
			}
			var page struct {
				Instances []status `json:"instances"`
			}
			e.expect(t, "GET", "/api/instances?prefix="+url.QueryEscape("invoice"), nil, http.StatusOK, &page)
			if len(page.Instances) != 1 || page.Instances[0].InstanceID != id {
				t.Fatalf("list: %+v", page.Instances)
			}
		default:
			t.Fatalf("start of %q: %s", id, clip(res.String()))
		}
	})
}
