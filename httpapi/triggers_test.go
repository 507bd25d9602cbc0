package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestParseTriggers(t *testing.T) {
	t.Parallel()
	t.Run("valid, with defaults", func(t *testing.T) {
		t.Parallel()
		ts, err := httpapi.ParseTriggers(strings.NewReader(`{"triggers": [
			{"id": "stripe-payment", "workflowId": "workflow_123", "orchestration": "demo.Approval",
			 "version": "1.0.0", "concurrency": "exclusive", "lockTtl": "1h", "idempotencyKeyPath": "/id"},
			{"id": "plain", "orchestration": "demo.Hello"},
			{"id": "fan", "orchestration": "demo.Hello", "concurrency": "parallel"},
			{"id": "q.1", "orchestration": "demo.Hello", "concurrency": "queue", "lockTtl": 90},
			{"id": "keyed", "orchestration": "demo.Hello", "concurrency": "replace", "workflowId": "customer-{/data/object/customer}",
			 "instanceId": "order-{/data/object/id}-{{x}}", "idempotencyKey": "gh-{header:X-GitHub-Delivery}"}
		]}`))
		if err != nil {
			t.Fatal(err)
		}
		want := []httpapi.Trigger{
			{ID: "stripe-payment", WorkflowID: "workflow_123", Orchestration: "demo.Approval", Version: "1.0.0",
				Concurrency: httpapi.ConcurrencyExclusive, LockTTL: httpapi.Duration{Duration: time.Hour}, IdempotencyKeyPath: "/id"},
			{ID: "plain", WorkflowID: "plain", Orchestration: "demo.Hello", Concurrency: httpapi.ConcurrencyExclusive},
			{ID: "fan", Orchestration: "demo.Hello", Concurrency: httpapi.ConcurrencyParallel},
			{ID: "q.1", WorkflowID: "q.1", Orchestration: "demo.Hello", Concurrency: httpapi.ConcurrencyQueue,
				LockTTL: httpapi.Duration{Duration: 90 * time.Second}},
			{ID: "keyed", WorkflowID: "customer-{/data/object/customer}", Orchestration: "demo.Hello", Concurrency: httpapi.ConcurrencyReplace,
				InstanceID: "order-{/data/object/id}-{{x}}", IdempotencyKey: "gh-{header:X-GitHub-Delivery}"},
		}
		if len(ts) != len(want) {
			t.Fatalf("got %d triggers, want %d", len(ts), len(want))
		}
		for i := range want {
			if ts[i] != want[i] {
				t.Errorf("trigger %d:\n got %+v\nwant %+v", i, ts[i], want[i])
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		ts, err := httpapi.ParseTriggers(strings.NewReader(`{"triggers": []}`))
		if err != nil || len(ts) != 0 {
			t.Fatalf("got %v, %v", ts, err)
		}
	})
	for _, tc := range []struct {
		name, doc string
		// errHas are substrings the error must contain (index, id, field).
		errHas []string
	}{
		{"not JSON", `{"triggers": [`, []string{"parsing triggers"}},
		{"trailing data", `{"triggers": []} {}`, []string{"unexpected data"}},
		{"unknown top-level field", `{"triggers": [], "extra": 1}`, []string{"extra"}},
		{"unknown trigger field", `{"triggers": [{"id": "a", "orchestration": "o", "workflowID2": "w"}]}`, []string{"workflowID2"}},
		{"missing id", `{"triggers": [{"orchestration": "o"}]}`, []string{"trigger 0", "id", "required"}},
		{"bad id", `{"triggers": [{"id": "a/b", "orchestration": "o"}]}`, []string{"trigger 0", `"a/b"`, "id"}},
		{"id with a colon", `{"triggers": [{"id": "a:b", "orchestration": "o"}]}`, []string{"trigger 0", "id"}},
		{"long id", `{"triggers": [{"id": "` + strings.Repeat("a", 129) + `", "orchestration": "o"}]}`, []string{"trigger 0", "id", "128"}},
		{"duplicate id", `{"triggers": [{"id": "a", "orchestration": "o"}, {"id": "a", "orchestration": "p"}]}`,
			[]string{"trigger 1", `"a"`, "id", "duplicate of trigger 0"}},
		{"missing orchestration", `{"triggers": [{"id": "a", "orchestration": "o"}, {"id": "b"}]}`, []string{"trigger 1", `"b"`, "orchestration", "required"}},
		{"bad concurrency", `{"triggers": [{"id": "a", "orchestration": "o", "concurrency": "serial"}]}`, []string{"trigger 0", "concurrency", "serial"}},
		{"negative ttl", `{"triggers": [{"id": "a", "orchestration": "o", "lockTtl": "-1s"}]}`, []string{"trigger 0", "lockTtl", "negative"}},
		{"unparsable ttl", `{"triggers": [{"id": "a", "orchestration": "o", "lockTtl": "soon"}]}`, []string{"duration"}},
		{"ttl of the wrong type", `{"triggers": [{"id": "a", "orchestration": "o", "lockTtl": true}]}`, []string{"duration"}},
		{"ttl on a parallel trigger", `{"triggers": [{"id": "a", "orchestration": "o", "concurrency": "parallel", "lockTtl": "1h"}]}`,
			[]string{"trigger 0", "lockTtl", "parallel"}},
		{"pointer without a slash", `{"triggers": [{"id": "a", "orchestration": "o", "idempotencyKeyPath": "id"}]}`,
			[]string{"trigger 0", "idempotencyKeyPath", "start with"}},
		{"pointer with a bad escape", `{"triggers": [{"id": "a", "orchestration": "o", "idempotencyKeyPath": "/a~2b"}]}`,
			[]string{"trigger 0", "idempotencyKeyPath", "~"}},
		{"unclosed placeholder", `{"triggers": [{"id": "ok", "orchestration": "o"}, {"id": "stripe", "orchestration": "o", "workflowId": "customer-{/data/object/customer"}]}`,
			[]string{"trigger 1", `"stripe"`, "workflowId", "not closed", "{{"}},
		{"stray closing brace", `{"triggers": [{"id": "a", "orchestration": "o", "workflowId": "a}b"}]}`,
			[]string{"trigger 0", "workflowId", "closes nothing", "}}"}},
		{"unknown placeholder", `{"triggers": [{"id": "orders", "orchestration": "o", "instanceId": "order-{id}"}]}`,
			[]string{"trigger 0", `"orders"`, "instanceId", "unknown placeholder {id}", "{/json/pointer}", "{header:Name}"}},
		{"empty placeholder", `{"triggers": [{"id": "a", "orchestration": "o", "instanceId": "x-{}"}]}`,
			[]string{"trigger 0", "instanceId", "unknown placeholder {}"}},
		{"bad header name", `{"triggers": [{"id": "gh", "orchestration": "o", "idempotencyKey": "{header:X GitHub}"}]}`,
			[]string{"trigger 0", `"gh"`, "idempotencyKey", "not a header name"}},
		{"empty header name", `{"triggers": [{"id": "gh", "orchestration": "o", "idempotencyKey": "{header:}"}]}`,
			[]string{"trigger 0", "idempotencyKey", "not a header name"}},
		{"bad pointer in a template", `{"triggers": [{"id": "a", "orchestration": "o", "instanceId": "{/a~2}"}]}`,
			[]string{"trigger 0", "instanceId", "~"}},
		{"template on a parallel trigger", `{"triggers": [{"id": "a", "orchestration": "o", "concurrency": "parallel", "workflowId": "{nope}"}]}`,
			[]string{"trigger 0", "workflowId", "unknown placeholder"}},
		{"constant instance ID with a slash", `{"triggers": [{"id": "a", "orchestration": "o", "instanceId": "a/b"}]}`,
			[]string{"trigger 0", "instanceId", `"/"`}},
		{"too many parts", `{"triggers": [{"id": "a", "orchestration": "o", "instanceId": "` + strings.Repeat("x{/a}", 20) + `"}]}`,
			[]string{"trigger 0", "instanceId", "the limit is 32"}},
		{"both idempotency forms", `{"triggers": [{"id": "a", "orchestration": "o", "idempotencyKeyPath": "/id", "idempotencyKey": "{/id}"}]}`,
			[]string{"trigger 0", "idempotencyKey", "not both"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := httpapi.ParseTriggers(strings.NewReader(tc.doc))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestDurationJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		out  string
	}{
		{`"1h"`, time.Hour, `"1h"`},
		{`"90s"`, 90 * time.Second, `"1m30s"`},
		{`"2h30m"`, 150 * time.Minute, `"2h30m"`},
		{`"1.5s"`, 1500 * time.Millisecond, `"1.5s"`},
		{`"0s"`, 0, `"0s"`},
		{`3600`, time.Hour, `"1h"`},
		{`0.25`, 250 * time.Millisecond, `"250ms"`},
	} {
		var d httpapi.Duration
		if err := json.Unmarshal([]byte(tc.in), &d); err != nil || d.Duration != tc.want {
			t.Errorf("decoding %s: %v, %v; want %v", tc.in, d.Duration, err, tc.want)
			continue
		}
		b, err := json.Marshal(d)
		if err != nil || string(b) != tc.out {
			t.Errorf("encoding %v: %s, %v; want %s", tc.want, b, err, tc.out)
		}
	}
	for _, bad := range []string{`"soon"`, `true`, `{}`, `1e300`} {
		var d httpapi.Duration
		if err := json.Unmarshal([]byte(bad), &d); err == nil {
			t.Errorf("decoding %s: no error", bad)
		}
	}
	// A zero TTL is left out of a trigger's JSON; a set one is a string.
	b, err := json.Marshal([]httpapi.Trigger{{ID: "a", Orchestration: "o"}, {ID: "b", Orchestration: "o", LockTTL: httpapi.Duration{Duration: time.Minute}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":"a","workflowId":"","orchestration":"o"},{"id":"b","workflowId":"","orchestration":"o","lockTtl":"1m"}]`; string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// TestExampleTriggers checks that the example triggers file parses and has
// one trigger of each policy.
func TestExampleTriggers(t *testing.T) {
	t.Parallel()
	ts, err := httpapi.LoadTriggers("../examples/triggers.json")
	if err != nil {
		t.Fatal(err)
	}
	policies := map[httpapi.Concurrency]int{}
	for _, tr := range ts {
		policies[tr.Concurrency]++
	}
	for _, c := range []httpapi.Concurrency{httpapi.ConcurrencyExclusive, httpapi.ConcurrencyParallel, httpapi.ConcurrencyQueue, httpapi.ConcurrencyReplace} {
		if policies[c] == 0 {
			t.Errorf("no %s trigger in %+v", c, ts)
		}
	}
	if ts[0].ID != "stripe-payment" || ts[0].WorkflowID != "workflow_123" || ts[0].LockTTL.Duration != time.Hour || ts[0].IdempotencyKeyPath != "/id" {
		t.Errorf("first trigger %+v", ts[0])
	}
	// The example triggers serve; stripe-customer locks per customer.
	e := newEnv(t, &httpapi.Options{Triggers: ts})
	e.expect(t, "POST", "/api/webhooks/greet", `"Ada"`, http.StatusOK, nil)
	a := e.started(t, "stripe-customer", stripeEvent("evt_1", "cus_A"), "")
	e.started(t, "stripe-customer", stripeEvent("evt_2", "cus_B"), "")
	e.conflicts(t, "stripe-customer", stripeEvent("evt_3", "cus_A"), a)
	e.heldBy(t, "customer-cus_A", a)
	// deploy replaces the running deployment of an environment.
	d1 := e.webhook(t, "deploy", `{"environment": "prod", "build": 17, "timeoutSeconds": 3600}`, "")
	d2 := e.webhook(t, "deploy", `{"environment": "prod", "build": 18, "timeoutSeconds": 3600}`, "")
	if d1.ExecutionID != "deploy-prod-17" || d2.ExecutionID != "deploy-prod-18" || d2.ReplacedExecutionID != "deploy-prod-17" {
		t.Fatalf("deploys: %s, then %s replacing %q", d1, d2, d2.ReplacedExecutionID)
	}
	// shop-orders, the order walkthrough of docs/webhooks.md: events of
	// one order go to one instance, started by the first; a redelivery
	// is a duplicate; the order ends shipped.
	shop := func(delivery, body string) webhookAnswer {
		t.Helper()
		return e.webhookHeader(t, "shop-orders", body, http.Header{"X-Shop-Webhook-Id": {delivery}})
	}
	if a := shop("w1", `{"order_id": 42, "type": "created"}`); a.ExecutionID != "order-42" || a.Started == nil || !*a.Started {
		t.Fatalf("first order event: %s", a)
	}
	if a := shop("w2", `{"order_id": 42, "type": "paid"}`); a.Started == nil || *a.Started {
		t.Fatalf("second order event: %s", a)
	}
	if a := shop("w2", `{"order_id": 42, "type": "paid"}`); !a.Duplicate {
		t.Fatalf("redelivered order event: %s", a)
	}
	shop("w3", `{"order_id": 42, "type": "shipped"}`)
	st := e.wait(t, "order-42")
	var out string
	if err := st.Decode(&out); err != nil || out != "shipped" {
		t.Fatalf("order-42: %q, %v", out, err)
	}
	var events int
	if ok, err := e.client.GetValue(context.Background(), "order-42", "events", &events); !ok || err != nil || events != 3 {
		t.Fatalf("order-42 values: events %d (%v, %v)", events, ok, err)
	}
}

func TestLoadTriggersMissingFile(t *testing.T) {
	t.Parallel()
	if _, err := httpapi.LoadTriggers(t.TempDir() + "/none.json"); err == nil || !strings.Contains(err.Error(), "none.json") {
		t.Fatalf("got %v", err)
	}
}

func TestNewHandlerValidatesTriggers(t *testing.T) {
	t.Parallel()
	store, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	client := duroxide.NewClient(store)
	for _, ts := range [][]httpapi.Trigger{
		{{ID: "a", Orchestration: "o"}, {ID: "a", Orchestration: "o"}},
		{{ID: "", Orchestration: "o"}},
		{{ID: "a"}},
		{{ID: "a", Orchestration: "o", Concurrency: "sometimes"}},
		{{ID: "a", Orchestration: "o", LockTTL: httpapi.Duration{Duration: -time.Second}}},
		{{ID: "a", Orchestration: "o", IdempotencyKeyPath: "id"}},
		{{ID: "a", Orchestration: "o", WorkflowID: "customer-{/customer"}},
		{{ID: "a", Orchestration: "o", InstanceID: "order-{id}"}},
		{{ID: "a", Orchestration: "o", IdempotencyKey: "{header:}"}},
	} {
		if _, err := httpapi.NewHandler(client, &httpapi.Options{Triggers: ts}); !errors.Is(err, duroxide.ErrInvalidArgument) {
			t.Errorf("triggers %+v: %v, want ErrInvalidArgument", ts, err)
		}
	}
}

func TestListTriggers(t *testing.T) {
	t.Parallel()
	in := []httpapi.Trigger{
		{ID: "ex", WorkflowID: "w", Orchestration: "demo.Approval", LockTTL: httpapi.Duration{Duration: time.Hour}, IdempotencyKeyPath: "/id"},
		{ID: "par", Orchestration: "demo.Hello", Concurrency: httpapi.ConcurrencyParallel},
	}
	e := newEnv(t, &httpapi.Options{Triggers: in})
	in[0].ID = "changed" // NewHandler keeps a copy
	res := e.expect(t, "GET", "/api/triggers", nil, http.StatusOK, nil)
	want := `{"triggers":[{"id":"ex","workflowId":"w","orchestration":"demo.Approval","concurrency":"exclusive","lockTtl":"1h","idempotencyKeyPath":"/id"},` +
		`{"id":"par","workflowId":"","orchestration":"demo.Hello","concurrency":"parallel"}]}`
	if got := strings.TrimSpace(string(res.body)); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := strings.TrimSpace(string(newEnv(t, nil).expect(t, "GET", "/api/triggers", nil, http.StatusOK, nil).body)); got != `{"triggers":[]}` {
		t.Fatalf("without triggers: %s", got)
	}
}
