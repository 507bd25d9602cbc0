package duroxide_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// storeSize is the number of history events of every execution of id and
// the messages left in the queues.
func storeSize(t *testing.T, h *duroxidetest.Harness, id string) (events, queued int64) {
	t.Helper()
	ctx := context.Background()
	execs, err := h.Client.ListExecutions(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range execs {
		events += e.EventCount
	}
	q, err := h.Store.QueueDepths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return events, q.OrchestratorReady + q.OrchestratorDelayed + q.OrchestratorLocked + q.WorkerReady + q.WorkerDelayed + q.WorkerLocked
}

// wantLimitFailure checks that st failed for going over the limit named limit.
func wantLimitFailure(t *testing.T, st *duroxide.Status, limit string) {
	t.Helper()
	err := st.Decode(nil)
	if st.State != duroxide.StateFailed || !errors.Is(err, duroxide.ErrLimitExceeded) {
		t.Fatalf("state %s, error %v; want Failed matching ErrLimitExceeded", st.State, err)
	}
	if st.Error.Kind != "configuration" || st.Error.Code != "limit_exceeded" || !strings.Contains(st.Error.Message, "over the limit "+limit) {
		t.Fatalf("error %+v; want kind configuration, code limit_exceeded, naming %s", st.Error, limit)
	}
}

// An orchestration fanning out to ten million activities fails at the
// default MaxActionsPerTurn instead of growing the server to gigabytes,
// and leaves two events in the store.
func TestLimitFanOutFailsAndStoreStaysSmall(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Id", func(_ context.Context, n int) (int, error) { return n, nil })
	duroxide.RegisterOrchestration(reg, "Fan", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		var tasks []*duroxide.Task
		for i := range n {
			tasks = append(tasks, ctx.ScheduleActivity("Id", i))
		}
		sum := 0
		for _, t := range tasks {
			var v int
			if err := t.Await(&v); err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	})
	h := duroxidetest.New(t, reg, nil)
	h.Start("Fan", "fan", 10_000_000)
	st := h.Wait("fan")
	wantLimitFailure(t, st, "MaxActionsPerTurn")
	if !strings.Contains(st.Error.Message, "10001") || !strings.Contains(st.Error.Message, "= 10000") {
		t.Fatalf("message %q does not name the value and the limit", st.Error.Message)
	}
	if events, queued := storeSize(t, h, "fan"); events != 2 || queued != 0 {
		t.Fatalf("the store holds %d events and %d queued messages; want 2 and 0", events, queued)
	}
	raw, err := json.Marshal(h.History("fan"))
	if err != nil || len(raw) > 4096 {
		t.Fatalf("the history takes %d bytes (%v); want at most 4 KiB", len(raw), err)
	}
}

// An activity whose result is over MaxPayloadBytes fails; its
// orchestration sees an *ActivityError matching ErrLimitExceeded.
func TestLimitActivityResultTooLarge(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Big", func(_ context.Context, n int) (string, error) {
		return strings.Repeat("x", n), nil
	})
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Big", n).Await(&s)
		var ae *duroxide.ActivityError
		if errors.As(err, &ae) && errors.Is(err, duroxide.ErrLimitExceeded) {
			return "refused: " + ae.Kind + ": " + ae.Message, nil
		}
		return "got " + s[:min(len(s), 10)], err
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{MaxPayloadBytes: 1000}})
	h.Start("O", "small", 100)
	h.Start("O", "big", 5000)
	var out string
	if st := h.Wait("small"); st.Decode(&out) != nil || out != "got xxxxxxxxxx" {
		t.Fatalf("small result: %q, %+v", out, st.Error)
	}
	if st := h.Wait("big"); st.Decode(&out) != nil || out != "refused: configuration: result of activity Big: 5002 bytes, over the limit MaxPayloadBytes = 1000" {
		t.Fatalf("big result: %q, %+v", out, st.Error)
	}
}

// A history that grows over MaxHistoryEvents fails the instance once; it
// is not retried.
func TestLimitHistoryEventsFailsTheInstance(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Step", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterOrchestration(reg, "Forever", func(ctx *duroxide.OrchestrationContext, n int) (int, error) {
		for {
			if err := ctx.ScheduleActivity("Step", n).Await(&n); err != nil {
				return n, err
			}
		}
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{MaxHistoryEvents: 30}})
	h.Start("Forever", "forever", 0)
	st := h.Wait("forever")
	wantLimitFailure(t, st, "MaxHistoryEvents")
	hist := h.History("forever")
	// The stored history, then the cancel of the activity in flight and
	// the failure.
	if len(hist) != 30+2 || hist[30].Kind != history.ActivityCancelRequested {
		t.Fatalf("history has %d events; want the limit of 30, a cancel and the failure", len(hist))
	}
	if last := hist[len(hist)-1]; last.Kind != history.OrchestrationFailed {
		t.Fatalf("last event %s", last.Kind)
	}
}

// A sub-orchestration that goes over a limit fails its parent's task with
// a *SubOrchestrationError matching ErrLimitExceeded.
func TestLimitChildFailure(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, n int) (string, error) {
		return strings.Repeat("c", n), nil
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, n int) (bool, error) {
		err := ctx.ScheduleSubOrchestration("Child", "", n).Await(nil)
		var se *duroxide.SubOrchestrationError
		return errors.As(err, &se) && errors.Is(err, duroxide.ErrLimitExceeded), nil
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{MaxPayloadBytes: 1000}})
	h.Start("Parent", "parent", 2000)
	var limited bool
	if st := h.Wait("parent"); st.Decode(&limited) != nil || !limited {
		t.Fatalf("parent saw no limit failure: %v %+v", limited, st.Error)
	}
}

// A client refuses a start or an event whose payload is over its limit
// before storing anything.
func TestLimitClientRefusesLargePayloads(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Wait", func(ctx *duroxide.OrchestrationContext, _ struct{}) (json.RawMessage, error) {
		var v json.RawMessage
		err := ctx.WaitForEvent("go").Await(&v)
		return v, err
	})
	h := duroxidetest.New(t, reg, &duroxidetest.Options{Runtime: &duroxide.RuntimeOptions{MaxPayloadBytes: 100}})
	ctx := context.Background()
	big := strings.Repeat("x", 200)
	err := h.Client.StartOrchestration(ctx, "big", "Wait", big, nil)
	var le *duroxide.LimitError
	if !errors.As(err, &le) || !errors.Is(err, duroxide.ErrInvalidArgument) || le.Limit != "MaxPayloadBytes" || le.Max != 100 || le.Value != 202 {
		t.Fatalf("start: %v (%+v); want a LimitError of MaxPayloadBytes 100, value 202, matching ErrInvalidArgument", err, le)
	}
	if _, err := h.Client.GetStatus(ctx, "big"); !errors.Is(err, duroxide.ErrNotFound) {
		t.Fatalf("the refused start was stored: %v", err)
	}
	h.Start("Wait", "w", nil)
	if err := h.Client.RaiseEvent(ctx, "w", "go", big); !errors.Is(err, duroxide.ErrLimitExceeded) {
		t.Fatalf("raise: %v, want ErrLimitExceeded", err)
	}
	h.RaiseEvent("w", "go", "ok")
	var out string
	if st := h.Wait("w"); st.Decode(&out) != nil || out != "ok" {
		t.Fatalf("the instance got %q, %+v; want the small event only", out, st.Error)
	}

	// The default client applies DefaultMaxPayloadBytes; a negative limit
	// turns it off.
	c := duroxide.NewClient(h.Store)
	huge := strings.Repeat("y", duroxide.DefaultMaxPayloadBytes)
	if err := c.StartOrchestration(ctx, "huge", "Wait", huge, nil); !errors.Is(err, duroxide.ErrLimitExceeded) {
		t.Fatalf("default client: %v", err)
	}
	c = duroxide.NewClientWithOptions(h.Store, &duroxide.ClientOptions{MaxPayloadBytes: -1})
	if err := c.StartOrchestration(ctx, "huge", "Wait", huge, nil); err != nil {
		t.Fatalf("client without a limit: %v", err)
	}
}

// Inspect reports the size of a live instance's history, measured close to
// its JSON encoding, and it grows with what arrives.
func TestStatusHistorySize(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, s string) (string, error) { return s, nil })
	duroxide.RegisterOrchestration(reg, "O", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		if err := ctx.ScheduleActivity("Echo", s).Await(&s); err != nil {
			return "", err
		}
		var more string
		if err := ctx.WaitForEvent("more").Await(&more); err != nil {
			return "", err
		}
		return s + more, ctx.WaitForEvent("end").Await(nil)
	})
	h := duroxidetest.New(t, reg, nil)
	ctx := context.Background()
	h.Start("O", "o", strings.Repeat("a", 1000))
	inspect := func(wantEvents int) *duroxide.Status {
		t.Helper()
		h.WaitIdle()
		st, err := h.Client.Inspect(ctx, "o", nil)
		if err != nil {
			t.Fatal(err)
		}
		hist := h.History("o")
		if st.HistoryEvents != int64(len(hist)) || len(hist) != wantEvents {
			t.Fatalf("HistoryEvents %d, history %d events; want %d", st.HistoryEvents, len(hist), wantEvents)
		}
		raw, err := json.Marshal(hist)
		if err != nil {
			t.Fatal(err)
		}
		if n := int64(len(raw)); st.HistoryBytes < n/2 || st.HistoryBytes > n*3/2 {
			t.Fatalf("HistoryBytes %d, far from the %d bytes of the history's JSON", st.HistoryBytes, n)
		}
		return st
	}
	// Started, the activity and its result, the wait: four events and
	// three copies of the input.
	before := inspect(4)
	if before.HistoryBytes < 3000 {
		t.Fatalf("HistoryBytes %d does not count the payloads", before.HistoryBytes)
	}
	h.RaiseEvent("o", "more", strings.Repeat("b", 5000))
	after := inspect(6)
	if d := after.HistoryBytes - before.HistoryBytes; d < 5000 || d > 5000+300 {
		t.Fatalf("the 5000-byte event added %d bytes", d)
	}
	// GetStatus reads one row and leaves them zero.
	if st := h.Status("o"); st.HistoryEvents != 0 || st.HistoryBytes != 0 {
		t.Fatalf("GetStatus: %d events, %d bytes", st.HistoryEvents, st.HistoryBytes)
	}
	// A finished instance keeps its history until purged: Inspect sizes it
	// too (the second wait, its event, OrchestrationCompleted: 8 events).
	h.RaiseEvent("o", "end", nil)
	if st := inspect(8); st.State != duroxide.StateCompleted || st.HistoryBytes <= after.HistoryBytes {
		t.Fatalf("finished: %s, %d bytes (live: %d)", st.State, st.HistoryBytes, after.HistoryBytes)
	}
}
