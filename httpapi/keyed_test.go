package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider"
)

// stripeEvent is a Stripe-style event body for demo.Approval (which reads
// timeoutSeconds and ignores the rest).
func stripeEvent(eventID, customer string) string {
	return fmt.Sprintf(`{"id": %q, "type": "invoice.paid", "timeoutSeconds": 3600, "data": {"object": {"customer": %q}}}`,
		eventID, customer)
}

// webhookHeader calls a webhook with headers and checks the answer's shape.
func (e *env) webhookHeader(t *testing.T, trigger, body string, h http.Header) webhookAnswer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	a, err := e.callWebhookHeader(ctx, trigger, body, h)
	if err != nil {
		t.Fatalf("webhook %s: %v", trigger, err)
	}
	checkWebhookShape(t, a)
	return a
}

// instances returns the IDs of every instance in the store.
func (e *env) instances(t *testing.T) []string {
	t.Helper()
	page, err := e.client.ListInstances(context.Background(), &duroxide.ListOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, st := range page.Instances {
		ids = append(ids, st.InstanceID)
	}
	return ids
}

// TestWebhookKeyedExclusive: a Stripe-style trigger with one lock per
// customer. Two customers run at once; a second event for a customer
// whose instance runs is refused naming it; a repeated event is a
// duplicate; the customer's lock frees when its instance ends.
func TestWebhookKeyedExclusive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "stripe-invoice", WorkflowID: "customer-{/data/object/customer}", Orchestration: demo.Approval,
		IdempotencyKeyPath: "/id",
	}}})
	a := e.started(t, "stripe-invoice", stripeEvent("evt_1", "cus_A"), "")
	b := e.started(t, "stripe-invoice", stripeEvent("evt_2", "cus_B"), "")
	e.heldBy(t, "customer-cus_A", a)
	e.heldBy(t, "customer-cus_B", b)
	for _, id := range []string{a, b} {
		if st := e.wait0(t, id); st.State.IsTerminal() {
			t.Fatalf("%s is %s", id, st.State)
		}
	}
	e.conflicts(t, "stripe-invoice", stripeEvent("evt_3", "cus_A"), a)
	e.conflicts(t, "stripe-invoice", stripeEvent("evt_4", "cus_B"), b)
	if dup := e.webhook(t, "stripe-invoice", stripeEvent("evt_1", "cus_A"), ""); dup.status != http.StatusOK || !dup.Duplicate || dup.ExecutionID != a {
		t.Fatalf("repeated event: %s, want a duplicate of %s", dup, a)
	}
	if got := e.instances(t); len(got) != 2 {
		t.Fatalf("instances %v, want only %s and %s", got, a, b)
	}
	e.approve(t, a)
	e.unlocked(t, "customer-cus_A")
	a2 := e.started(t, "stripe-invoice", stripeEvent("evt_3", "cus_A"), "")
	e.heldBy(t, "customer-cus_A", a2)
	e.heldBy(t, "customer-cus_B", b)
}

// TestWebhookGitHubDelivery: a trigger keyed by the X-GitHub-Delivery
// header, as its instance ID and its idempotency key: a redelivery is a
// duplicate of the first instance.
func TestWebhookGitHubDelivery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "github-push", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel,
		InstanceID: "gh-{header:X-GitHub-Delivery}", IdempotencyKey: "{header:X-GitHub-Delivery}",
	}}})
	h := http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}}
	first := e.webhookHeader(t, "github-push", `"Ada"`, h)
	if first.status != http.StatusOK || first.Duplicate || first.ExecutionID != "gh-72d3162e-cc78-11e3-81ab-4c9367dc0958" {
		t.Fatalf("first delivery: %s", first)
	}
	if st := e.wait(t, first.ExecutionID); st.State != duroxide.StateCompleted || string(st.Output) != `"Hello, Ada!"` {
		t.Fatalf("%s ended %s %s", first.ExecutionID, st.State, st.Output)
	}
	again := e.webhookHeader(t, "github-push", `"Ada"`, h)
	if again.status != http.StatusOK || !again.Duplicate || again.ExecutionID != first.ExecutionID {
		t.Fatalf("redelivery: %s, want duplicate of %s", again, first.ExecutionID)
	}
	other := e.webhookHeader(t, "github-push", `"Bob"`, http.Header{"X-GitHub-Delivery": {"second"}})
	if other.status != http.StatusOK || other.Duplicate || other.ExecutionID != "gh-second" {
		t.Fatalf("another delivery: %s", other)
	}
	// The Idempotency-Key header takes precedence over the template.
	h2 := http.Header{"X-GitHub-Delivery": {"third"}, "Idempotency-Key": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}}
	if a := e.webhookHeader(t, "github-push", `"Cy"`, h2); a.status != http.StatusOK || !a.Duplicate || a.ExecutionID != first.ExecutionID {
		t.Fatalf("Idempotency-Key header: %s, want duplicate of %s", a, first.ExecutionID)
	}
}

// TestWebhookInstanceIDTemplate: an instance ID built from the body, with
// numbers written exactly as sent; a second call for the same order finds
// the instance there (409).
func TestWebhookInstanceIDTemplate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "orders", InstanceID: "order-{/data/object/id}", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyParallel,
	}}})
	for _, tc := range []struct{ id, want string }{
		{`"ord_42"`, "order-ord_42"},
		{`12345678901234567890123`, "order-12345678901234567890123"},
		{`1.50`, "order-1.50"},
		{`1e3`, "order-1e3"},
	} {
		body := `{"timeoutSeconds": 3600, "data": {"object": {"id": ` + tc.id + `}}}`
		a := e.webhook(t, "orders", body, "")
		if a.status != http.StatusOK || a.ExecutionID != tc.want {
			t.Fatalf("id %s: %s, want instance %s", tc.id, a, tc.want)
		}
		if _, err := e.client.GetStatus(context.Background(), tc.want); err != nil {
			t.Fatalf("%s: %v", tc.want, err)
		}
	}
	a := e.webhook(t, "orders", `{"data": {"object": {"id": "ord_42"}}}`, "")
	if a.status != http.StatusConflict || a.Error != "instance already exists" || !strings.Contains(a.Details, "order-ord_42") {
		t.Fatalf("second call for order ord_42: %s, want 409 instance already exists", a)
	}
}

// TestWebhookKeyErrors: every call whose keys cannot be built from the
// request is answered 400 naming the field and where it comes from, and
// starts nothing, with answers of bounded size whatever the value.
func TestWebhookKeyErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{MaxBodyBytes: 1 << 20, Triggers: []httpapi.Trigger{
		{ID: "orders", InstanceID: "order-{/order/id}", WorkflowID: "customer-{/order/customer}", Orchestration: demo.Hello,
			IdempotencyKey: "evt-{/event}"},
		{ID: "gh", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel,
			IdempotencyKey: "{header:X-GitHub-Delivery}"},
	}})
	huge := strings.Repeat("x", 200_000)
	order := func(id, customer, event string) string {
		return `{"order": {"id": ` + id + `, "customer": ` + customer + `}, "event": ` + event + `}`
	}
	t.Run("cases", func(t *testing.T) {
		for _, tc := range []struct {
			name, trigger, body string
			header              http.Header
			err                 string
			detailsHas          []string
		}{
			{"missing instance ID", "orders", `{"order": {"customer": "c"}, "event": "e"}`, nil,
				"missing instance ID", []string{"orders", "/order/id in the body", "instanceId", "no value"}},
			{"instance ID of the wrong type", "orders", order(`{"n": 1}`, `"c"`, `"e"`), nil,
				"invalid instance ID", []string{"/order/id in the body", "instanceId", "string or a number", "an object"}},
			{"instance ID null", "orders", order(`null`, `"c"`, `"e"`), nil,
				"invalid instance ID", []string{"/order/id in the body", "null"}},
			{"instance ID boolean", "orders", order(`true`, `"c"`, `"e"`), nil,
				"invalid instance ID", []string{"/order/id in the body", "a boolean"}},
			{"empty instance ID", "orders", order(`""`, `"c"`, `"e"`), nil,
				"missing instance ID", []string{"/order/id in the body", "empty"}},
			{"instance ID with a slash", "orders", order(`"a/b"`, `"c"`, `"e"`), nil,
				"invalid instance ID", []string{"instanceId", `"/"`}},
			{"huge instance ID", "orders", order(`"`+huge+`"`, `"c"`, `"e"`), nil,
				"invalid instance ID", []string{"instanceId", "200006 bytes long", "256"}},
			{"control character in the instance ID", "orders", order(`"a\u0007b"`, `"c"`, `"e"`), nil,
				"invalid instance ID", []string{"instanceId", "control character U+0007"}},
			{"missing lock key", "orders", `{"order": {"id": 1}, "event": "e"}`, nil,
				"missing lock key", []string{"/order/customer in the body", "workflowId"}},
			{"lock key array", "orders", order(`1`, `[1]`, `"e"`), nil,
				"invalid lock key", []string{"/order/customer in the body", "an array"}},
			{"huge lock key", "orders", order(`1`, `"`+huge+`"`, `"e"`), nil,
				"invalid lock key", []string{"workflowId", "bytes long", "512"}},
			{"control character in the lock key", "orders", order(`1`, `"c\u001b"`, `"e"`), nil,
				"invalid lock key", []string{"workflowId", "control character U+001B"}},
			{"missing idempotency key", "orders", `{"order": {"id": 1, "customer": "c"}}`, nil,
				"missing idempotency key", []string{"/event in the body", "idempotencyKey"}},
			{"huge idempotency key", "orders", order(`1`, `"c"`, `"`+huge+`"`), nil,
				"invalid idempotency key", []string{"bytes long"}},
			{"control character in the idempotency key", "orders", order(`1`, `"c"`, `"e\u0000"`), nil,
				"invalid idempotency key", []string{"idempotencyKey", "control character U+0000"}},
			{"malformed JSON", "orders", `{"order": `, nil, "malformed JSON", nil},
			{"missing header", "gh", `"Ada"`, nil,
				"missing idempotency key", []string{"gh", "header X-GitHub-Delivery", "idempotencyKey"}},
			{"empty header", "gh", `"Ada"`, http.Header{"X-Github-Delivery": {""}},
				"missing idempotency key", []string{"header X-GitHub-Delivery", "empty"}},
			{"repeated header", "gh", `"Ada"`, http.Header{"X-Github-Delivery": {"a", "b"}},
				"invalid idempotency key", []string{"header X-GitHub-Delivery", "2 times"}},
			{"control character in a header", "gh", `"Ada"`, http.Header{"X-Github-Delivery": {"a\tb"}},
				"invalid idempotency key", []string{"control character U+0009"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				h := tc.header
				if h == nil {
					h = http.Header{}
				}
				a := e.webhookHeader(t, tc.trigger, tc.body, h)
				if a.status != http.StatusBadRequest || a.Error != tc.err {
					t.Fatalf("got %s, want 400 %q", a, tc.err)
				}
				for _, s := range tc.detailsHas {
					if !strings.Contains(a.Details, s) {
						t.Errorf("details %q do not contain %q", a.Details, s)
					}
				}
				if a.size > 2048 {
					t.Errorf("answer of %d bytes for a body of %d", a.size, len(tc.body))
				}
			})
		}
	})
	// The group above waits for its parallel cases.
	if got := e.instances(t); len(got) != 0 {
		t.Errorf("refused calls started %v", got)
	}
	if got := e.listLocks(t); len(got) != 0 {
		t.Errorf("refused calls took locks %+v", got)
	}
}

// TestWebhookReplace: a replace trigger cancels the instance holding its
// key's lock, naming the new instance in the reason, and the new one
// takes the lock when the holder ends; other keys are left alone.
func TestWebhookReplace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "deploy", WorkflowID: "env-{/env}", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyReplace,
	}}})
	body := func(env string) string { return `{"env": "` + env + `", "timeoutSeconds": 3600}` }
	first := e.webhook(t, "deploy", body("prod"), "")
	if first.status != http.StatusOK || first.ReplacedExecutionID != "" || first.Queued {
		t.Fatalf("first call on a free lock: %s, replaced=%q queued=%v", first, first.ReplacedExecutionID, first.Queued)
	}
	dev := e.started(t, "deploy", body("dev"), "")
	e.heldBy(t, "env-prod", first.ExecutionID)

	second := e.webhook(t, "deploy", body("prod"), "")
	if second.status != http.StatusOK || second.ReplacedExecutionID != first.ExecutionID || second.ExecutionID == first.ExecutionID {
		t.Fatalf("second call: %s, replaced=%q, want %s replaced", second, second.ReplacedExecutionID, first.ExecutionID)
	}
	st := e.wait(t, first.ExecutionID)
	if st.State != duroxide.StateCanceled || st.Error == nil || !strings.Contains(st.Error.Message, "replaced by "+second.ExecutionID) ||
		!strings.Contains(st.Error.Message, "webhook deploy") {
		t.Fatalf("replaced instance ended %s %+v, want Canceled naming %s", st.State, st.Error, second.ExecutionID)
	}
	// The lock passed to the new instance as the old one ended.
	e.heldBy(t, "env-prod", second.ExecutionID)
	e.heldBy(t, "env-dev", dev)
	if st := e.wait0(t, dev); st.State.IsTerminal() {
		t.Fatalf("the other key's instance is %s", st.State)
	}
	e.approve(t, second.ExecutionID)
	e.unlocked(t, "env-prod")
}

// TestWebhookReplaceOneStep: a replace call stores its start and the
// holder's cancel in one store call (one transaction). A store that fails
// any later write (here: every cancel sent on its own) still sees the
// replace done whole; a call whose start fails cancels nothing.
func TestWebhookReplaceOneStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "deploy", WorkflowID: "env-prod", InstanceID: "deploy-{/build}", Orchestration: demo.Approval,
		Concurrency: httpapi.ConcurrencyReplace,
	}}})
	body := func(build string) string { return `{"build": "` + build + `", "timeoutSeconds": 3600}` }
	first := e.webhook(t, "deploy", body("16"), "")
	holder := e.webhook(t, "deploy", body("17"), "")
	if st := e.wait(t, first.ExecutionID); st.State != duroxide.StateCanceled || holder.ReplacedExecutionID != first.ExecutionID {
		t.Fatalf("first replace: %s, replaced %s", st.State, holder.ReplacedExecutionID)
	}
	e.heldBy(t, "env-prod", holder.ExecutionID)

	var mu sync.Mutex
	var calls [][]*provider.OrchestratorMessage
	e.store.onEnqueue(func(msgs []*provider.OrchestratorMessage) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, msgs)
		if len(msgs) == 1 && msgs[0].Item.Kind == history.WorkCancelInstance {
			return fmt.Errorf("the store fails a second write: %w", provider.ErrUnavailable)
		}
		return nil
	})
	// The start fails (its instance ID is taken by the first, canceled,
	// instance): the holder is not canceled.
	if dup := e.webhook(t, "deploy", body("16"), ""); dup.status != http.StatusConflict {
		t.Fatalf("replace with a taken instance ID: %s, want 409", dup)
	}
	// Whether the answer says queued depends on timing: the runtime may
	// end the canceled holder, passing the lock on, before the answer
	// reads the new instance (TestWebhookReplaceArrivalOrder checks the
	// queue with no runtime running).
	r := e.webhook(t, "deploy", body("18"), "")
	if r.status != http.StatusOK || r.ReplacedExecutionID != holder.ExecutionID {
		t.Fatalf("replace: %s replaced=%q, want %s replaced", r, r.ReplacedExecutionID, holder.ExecutionID)
	}
	mu.Lock()
	got := slices.Clone(calls)
	mu.Unlock()
	if len(got) != 2 || len(got[1]) != 1 || got[1][0].InstanceID != r.ExecutionID || got[1][0].Create.Lock == nil || !got[1][0].Create.Lock.Replace {
		t.Fatalf("store calls %+v, want the failed start, then one call starting %s and canceling %s", got, r.ExecutionID, holder.ExecutionID)
	}
	e.store.onEnqueue(nil)
	st := e.wait(t, holder.ExecutionID)
	if st.State != duroxide.StateCanceled || st.Error == nil || !strings.Contains(st.Error.Message, "replaced by "+r.ExecutionID) {
		t.Fatalf("holder ended %s %+v, want Canceled by %s only", st.State, st.Error, r.ExecutionID)
	}
	e.heldBy(t, "env-prod", r.ExecutionID)
	e.approve(t, r.ExecutionID)
	e.unlocked(t, "env-prod")
}

// TestWebhookReplaceArrivalOrder: replaces that arrive while the holder
// has not yet ended both cancel it and queue in arrival order; the later
// one does not cancel the earlier one, which runs first. (No runtime runs
// until both calls are answered, so the order is certain.)
func TestWebhookReplaceArrivalOrder(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "deploy", WorkflowID: "env-{/env}", Orchestration: demo.Approval, Concurrency: httpapi.ConcurrencyReplace,
	}}}, nil, false)
	const body = `{"env": "prod", "timeoutSeconds": 3600}`
	holder := e.webhook(t, "deploy", body, "")
	r1 := e.webhook(t, "deploy", body, "")
	r2 := e.webhook(t, "deploy", body, "")
	if r1.ReplacedExecutionID != holder.ExecutionID || !r1.Queued || r1.QueuePosition != 1 {
		t.Fatalf("first replace: %s replaced=%q queued=%v position=%d", r1, r1.ReplacedExecutionID, r1.Queued, r1.QueuePosition)
	}
	if r2.ReplacedExecutionID != holder.ExecutionID || !r2.Queued || r2.QueuePosition != 2 {
		t.Fatalf("second replace: %s replaced=%q queued=%v position=%d", r2, r2.ReplacedExecutionID, r2.Queued, r2.QueuePosition)
	}
	rt, err := duroxide.StartRuntime(context.Background(), e.store, e.reg, &duroxide.RuntimeOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			t.Errorf("runtime shutdown: %v", err)
		}
	})
	if st := e.wait(t, holder.ExecutionID); st.State != duroxide.StateCanceled {
		t.Fatalf("holder ended %s", st.State)
	}
	if l := e.heldBy(t, "env-prod", r1.ExecutionID); l.Queued != 1 {
		t.Fatalf("queued %d behind the first replace, want 1", l.Queued)
	}
	if st := e.wait0(t, r2.ExecutionID); st.State != duroxide.StatePending {
		t.Fatalf("second replace is %s while the first holds the lock, want Pending", st.State)
	}
	e.approve(t, r1.ExecutionID)
	e.heldBy(t, "env-prod", r2.ExecutionID)
	e.approve(t, r2.ExecutionID)
	e.unlocked(t, "env-prod")
}

// TestWebhookKeyedBurst fires 50 calls at once across 5 customers at an
// exclusive per-customer trigger: each customer gets exactly one running
// instance, and every other call is a 409.
func TestWebhookKeyedBurst(t *testing.T) {
	t.Parallel()
	const calls, customers = 50, 5
	e := newEnv(t, &httpapi.Options{Triggers: []httpapi.Trigger{{
		ID: "stripe-invoice", WorkflowID: "customer-{/data/object/customer}", Orchestration: demo.Approval,
	}}})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	answers := make([]webhookAnswer, calls)
	errs := make([]error, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i], errs[i] = e.callWebhook(ctx, "stripe-invoice", stripeEvent(fmt.Sprintf("evt_%d", i), fmt.Sprintf("cus_%d", i%customers)), "")
		}()
	}
	wg.Wait()
	for i, a := range answers {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		checkWebhookShape(t, a)
	}
	started := exclusivePerCustomer(t, answers, customers, func(a webhookAnswer) bool {
		return a.Error == "Workflow currently executing" || a.Error == "Concurrent execution attempted"
	})
	if got := e.instances(t); len(got) != customers {
		t.Fatalf("instances %v, want %d", got, customers)
	}
	for customer, id := range started {
		e.heldBy(t, "customer-"+customer, id)
		if st := e.wait0(t, id); st.State.IsTerminal() {
			t.Fatalf("%s is %s", id, st.State)
		}
	}
}

// exclusivePerCustomer checks the answers of a burst of exclusive webhook
// calls, call i for customer cus_<i % customers>: each customer got one
// instance started (200) and every other call was refused (409, with
// refused true for it) naming that customer's instance, if any. It
// returns the instances started, by customer.
func exclusivePerCustomer(t *testing.T, answers []webhookAnswer, customers int, refused func(webhookAnswer) bool) map[string]string {
	t.Helper()
	started := map[string]string{} // customer → instance
	for i, a := range answers {
		customer := fmt.Sprintf("cus_%d", i%customers)
		switch {
		case a.status == http.StatusOK:
			if prev, dup := started[customer]; dup {
				t.Fatalf("%s got two instances: %s and %s", customer, prev, a.ExecutionID)
			}
			started[customer] = a.ExecutionID
		case a.status == http.StatusConflict && refused(a):
		default:
			t.Fatalf("call %d: %s", i, a)
		}
	}
	if len(started) != customers {
		t.Fatalf("started %v, want one instance for each of %d customers", started, customers)
	}
	for i, a := range answers {
		if a.status == http.StatusConflict && a.ExistingExecutionID != "" && a.ExistingExecutionID != started[fmt.Sprintf("cus_%d", i%customers)] {
			t.Fatalf("call %d refused naming %s, not its customer's instance", i, a.ExistingExecutionID)
		}
	}
	return started
}
