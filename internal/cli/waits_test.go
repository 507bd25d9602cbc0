package cli

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestDescribeWait(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 10, 2, 0, 0, time.UTC)
	tests := []struct {
		w    duroxide.Wait
		want string
	}{
		{duroxide.Wait{Kind: duroxide.WaitEvent, Name: "approval", Since: at},
			"event `approval` since 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitTimer, FiresAt: at},
			"timer fires at 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitTimer, Name: duroxide.CancelGraceWaitName, FiresAt: at},
			"timer fires at 2026-03-01T10:02:00.000Z (cancel grace period)"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Charge", Attempt: 3, ActivityState: duroxide.ActivityRetrying, RetryAt: at},
			"activity `Charge` attempt 3, retrying at 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Charge", Attempt: 1, Deliveries: 2, ActivityState: duroxide.ActivityRunning, LockedUntil: at},
			"activity `Charge` attempt 1, running (worker lock until 2026-03-01T10:02:00.000Z), delivered 2 times"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Charge", Attempt: 1, ActivityState: duroxide.ActivityQueued, Since: at},
			"activity `Charge` attempt 1, queued since 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Render", Attempt: 1, ActivityState: duroxide.ActivityRunning, LockedUntil: at,
			Queue: "gpu", HeartbeatTimeoutMs: 60000, HeartbeatAt: at, HeartbeatDetails: []byte(`{"frame":12}`)},
			"activity `Render` attempt 1, running (worker lock until 2026-03-01T10:02:00.000Z), queue `gpu`, heartbeat timeout 1m0s, last heartbeat 2026-03-01T10:02:00.000Z ({\"frame\":12})"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Render", Attempt: 1, ActivityState: duroxide.ActivityQueued, Since: at,
			Queue: "gpu\x1b", Unserved: true, Message: "no runtime serves activity Render (queue \"gpu\\x1b\")"},
			"activity `Render` attempt 1, queued since 2026-03-01T10:02:00.000Z, queue `\"gpu\\x1b\"`; no runtime serves activity Render (queue \"gpu\\x1b\")"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Charge", Attempt: 1, ActivityState: duroxide.ActivityDone},
			"activity `Charge` attempt 1, finished: its result waits for the next turn"},
		{duroxide.Wait{Kind: duroxide.WaitChild, InstanceID: "x", ChildState: duroxide.StateRunning, Since: at},
			"child `x` (Running) since 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitLock, LockKey: "wf", Holder: "a", QueuePosition: 2, Since: at},
			"execution lock `wf` held by `a`, place 2 in its queue, since 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitDelayedStart, At: at},
			"delayed start at 2026-03-01T10:02:00.000Z"},
		{duroxide.Wait{Kind: duroxide.WaitUnregisteredOrchestration, Name: "Order", Version: "2.0.0", Attempt: 4, Since: at, RetryAt: at.Add(time.Minute)},
			"orchestration `Order@2.0.0`, which no runtime that fetched it has registered, since 2026-03-01T10:02:00.000Z (attempt 4, retrying at 2026-03-01T10:03:00.000Z)"},
		{duroxide.Wait{Kind: duroxide.WaitActivity, Name: "Charge", Attempt: 1, ActivityState: duroxide.ActivityQueued, Since: at,
			StartToCloseTimeoutMs: 30000, ScheduleToCloseTimeoutMs: 3600000},
			"activity `Charge` attempt 1, queued since 2026-03-01T10:02:00.000Z, start-to-close timeout 30s, schedule-to-close timeout 1h0m0s"},
		{duroxide.Wait{Kind: duroxide.WaitUnregisteredOrchestration, Name: "Charge", Since: at, Unserved: true,
			Message: "no runtime registers orchestration Charge", Stalled: true,
			StalledReason: "no progress for 6m0s: no runtime registers orchestration Charge since 2026-03-01T10:02:00Z"},
			"orchestration `Charge`, which no live runtime registers, since 2026-03-01T10:02:00.000Z -- STALLED: no progress for 6m0s: no runtime registers orchestration Charge since 2026-03-01T10:02:00Z"},
		{duroxide.Wait{Kind: duroxide.WaitUnregisteredActivity, Name: "Charge", Attempt: 2, Since: at},
			"activity `Charge`, which no runtime that fetched it has registered, since 2026-03-01T10:02:00.000Z (attempt 2)"},
		{duroxide.Wait{Kind: duroxide.WaitParked, EventID: 2, Expected: "ActivityScheduled Charge", Found: "scheduled Refund", Since: at},
			"a deploy that replays its history: parked after nondeterminism since 2026-03-01T10:02:00.000Z; at event 2 history has ActivityScheduled Charge, but the code scheduled Refund"},
		{duroxide.Wait{Kind: duroxide.WaitTurn, Messages: 2, Since: at, Stalled: true, StalledReason: "no progress for 6m0s"},
			"a runtime to take 2 due message(s), due since 2026-03-01T10:02:00.000Z -- STALLED: no progress for 6m0s"},
		// Names are user input: control characters are quoted, never printed raw.
		{duroxide.Wait{Kind: duroxide.WaitEvent, Name: "a\x1b[2Jb\n", Since: at},
			"event `\"a\\x1b[2Jb\\n\"` since 2026-03-01T10:02:00.000Z"},
	}
	for _, tt := range tests {
		if got := describeWait(&tt.w); got != tt.want {
			t.Errorf("describeWait(%s):\n got %s\nwant %s", tt.w.Kind, got, tt.want)
		}
	}
}

func TestStatusWaitingAndStalled(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	// Instances started an hour ago through a store on an hour-old clock,
	// with no runtime since: their starts are due and nobody took them.
	ctx := context.Background()
	past := time.Now().Add(-time.Hour)
	store, err := sqlite.Open(ctx, path, &sqlite.Options{Clock: func() time.Time { return past }})
	if err != nil {
		t.Fatal(err)
	}
	c := duroxide.NewClient(store)
	for _, id := range []string{"old-1", "old-2"} {
		if err := c.StartOrchestration(ctx, id, demo.Hello, "x", nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.StartOrchestration(ctx, "later", demo.Hello, "x", &duroxide.StartOptions{StartAt: past.Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	r := runCLI(t, "status", "old-1", "--db", db).wantCode(t, 0)
	for _, want := range []string{"Waiting for (STALLED):", "a runtime to take 1 due message(s)", "-- STALLED: no progress for"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "status", "later", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, "Waiting for:\n  - delayed start at ") || strings.Contains(r.stdout, "STALLED") {
		t.Fatalf("status of a delayed start:\n%s", r.stdout)
	}
	var st duroxide.Status
	runCLI(t, "status", "old-1", "--json", "--db", db).wantCode(t, 0).decode(t, &st)
	if !st.Stalled || len(st.WaitingFor) != 1 || st.WaitingFor[0].Kind != duroxide.WaitTurn || !st.WaitingFor[0].Stalled {
		t.Fatalf("status --json = %+v", st)
	}
	// A threshold above the hour: not stalled.
	r = runCLI(t, "status", "old-1", "--stalled-after", "2h", "--db", db).wantCode(t, 0)
	if strings.Contains(r.stdout, "STALLED") {
		t.Fatalf("stalled under a 2h threshold:\n%s", r.stdout)
	}

	r = runCLI(t, "list", "--stalled", "--db", db).wantCode(t, 0)
	if !strings.Contains(r.stdout, "old-1") || !strings.Contains(r.stdout, "old-2") || strings.Contains(r.stdout, "later") ||
		!strings.Contains(r.stdout, "STALLED") {
		t.Fatalf("list --stalled:\n%s", r.stdout)
	}
	var page duroxide.InstancePage
	runCLI(t, "list", "--stalled", "--json", "--db", db).wantCode(t, 0).decode(t, &page)
	if len(page.Instances) != 2 || !page.Instances[0].Stalled || len(page.Instances[0].WaitingFor) == 0 {
		t.Fatalf("list --stalled --json = %+v", page)
	}
	r = runCLI(t, "list", "--stalled", "--stalled-after", "2h", "--db", db).wantCode(t, 0)
	if strings.TrimSpace(r.stdout) != "no instances" {
		t.Fatalf("list --stalled under a 2h threshold:\n%s", r.stdout)
	}

	for _, args := range [][]string{
		{"list", "--stalled", "--cursor", "x"},
		{"list", "--stalled", "--stalled-after", "0s"},
		{"list", "--stalled", "--stalled-after", "-1m"},
		{"status", "old-1", "--stalled-after", "0"},
	} {
		runCLI(t, append(args, "--db", db)...).wantErr(t, 2, "--")
	}
	runCLI(t, "list", "--stalled-after", "soon", "--db", db).wantCode(t, 2)
	runCLI(t, "serve", "--stalled-after", "0s", "--db", db).wantErr(t, 2, "--stalled-after must be positive")
}

// status prints the patches the execution recorded, made safe.
func TestPrintStatusPatches(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	st := &duroxide.Status{InstanceID: "p1", State: duroxide.StateRunning, Patches: []string{"fix-42", "audit\x1b[2J"}}
	if err := printStatus(&b, st); err != nil {
		t.Fatal(err)
	}
	if want := `"fix-42, audit\x1b[2J"`; !strings.Contains(b.String(), "Patches:") || !strings.Contains(b.String(), want) {
		t.Fatalf("status:\n%s\nlacks %s", b.String(), want)
	}
}

// duroxide history shows the options an activity was scheduled with: its
// queue and timeouts.
func TestEventDetailsShowActivityOptions(t *testing.T) {
	t.Parallel()
	e := &history.Event{EventID: 2, Kind: history.ActivityScheduled, Name: "Render", Queue: "gpu",
		StartToCloseTimeoutMs: 60_000, ScheduleToCloseTimeoutMs: 3_600_000, HeartbeatTimeoutMs: 10_000}
	want := "name=Render queue=gpu startToClose=1m0s scheduleToClose=1h0m0s heartbeatTimeout=10s"
	if got := eventDetails(e); got != want {
		t.Fatalf("eventDetails = %q, want %q", got, want)
	}
}

// duroxide status, on a store where an activity runs, shows what the
// activity was called with and its latest heartbeat (through
// Client.Inspect), and the patches the execution recorded; duroxide
// history shows the options on ActivityScheduled.
func TestStatusShowsARunningActivitysHeartbeat(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	reg := duroxide.NewRegistry()
	beating, release := make(chan struct{}), make(chan struct{})
	render := duroxide.RegisterActivity(reg, "Render", func(ctx context.Context, frame int) (string, error) {
		if err := duroxide.ActivityContextFrom(ctx).Heartbeat(ctx, map[string]int{"frame": frame}); err != nil {
			return "", err
		}
		close(beating)
		select {
		case <-release:
			return "rendered", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	duroxide.RegisterOrchestration(reg, "Film", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		ctx.Patched("gpu-render")
		return duroxide.CallActivity(ctx, render, 12, &duroxide.ActivityOptions{Queue: "gpu", HeartbeatTimeout: time.Hour,
			StartToCloseTimeout: 2 * time.Hour, ScheduleToCloseTimeout: 3 * time.Hour,
			Retry: &duroxide.RetryPolicy{MaxAttempts: 2}}).Get()
	})
	client := startRuntimeWith(t, path, reg, &duroxide.RuntimeOptions{PollInterval: 10 * time.Millisecond, Queues: []string{"gpu"}})
	var once sync.Once
	finish := func() { once.Do(func() { close(release) }) }
	t.Cleanup(finish) // before the runtime's Shutdown, should the test fail
	ctx := context.Background()
	if err := client.StartOrchestration(ctx, "film", "Film", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-beating:
	case <-time.After(30 * time.Second):
		t.Fatal("the activity did not heartbeat")
	}

	r := runCLI(t, "status", "film", "--db", db).wantCode(t, 0)
	for _, want := range []string{"Patches:", "gpu-render", "activity `Render` attempt 1, running", "queue `gpu`",
		"heartbeat timeout 1h0m0s", "start-to-close timeout 2h0m0s", "schedule-to-close timeout 3h0m0s",
		"last heartbeat ", `({"frame":12})`} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	r = runCLI(t, "history", "film", "--db", db).wantCode(t, 0)
	if want := "queue=gpu startToClose=2h0m0s scheduleToClose=3h0m0s heartbeatTimeout=1h0m0s"; !strings.Contains(r.stdout, want) {
		t.Fatalf("history lacks %q:\n%s", want, r.stdout)
	}
	finish()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if st, err := client.WaitForOrchestration(wctx, "film"); err != nil || st.State != duroxide.StateCompleted {
		t.Fatalf("film: %v, %v", st, err)
	}
}

// deadlineText says how long is left before an instance timeout, or that
// it passed.
func TestDeadlineText(t *testing.T) {
	t.Parallel()
	d := time.Date(2026, 3, 4, 6, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now  time.Time
		want string
	}{
		{d.Add(-4*time.Minute - 59*time.Second - 400*time.Millisecond), "2026-03-04T06:00:00.000Z (in 4m59s; the instance times out then)"},
		{d.Add(2 * time.Minute), "2026-03-04T06:00:00.000Z (passed 2m0s ago: the instance is timing out)"},
		{d, "2026-03-04T06:00:00.000Z (passed 0s ago: the instance is timing out)"},
	} {
		if got := deadlineText(d, c.now); got != c.want {
			t.Errorf("deadlineText(%v) = %q, want %q", c.now, got, c.want)
		}
	}
}

// duroxide status shows the deadline of an instance started with a
// timeout (StartOptions.Timeout), from its first turn, and --json has it;
// an instance without one shows none.
func TestStatusShowsTheInstanceDeadline(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Wait", func(ctx *duroxide.OrchestrationContext, _ struct{}) (string, error) {
		var s string
		return s, ctx.WaitForEvent("go").Await(&s)
	})
	client := startRuntimeWith(t, path, reg, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for id, opts := range map[string]*duroxide.StartOptions{"timed": {Timeout: time.Hour}, "untimed": nil} {
		if err := client.StartOrchestration(ctx, id, "Wait", struct{}{}, opts); err != nil {
			t.Fatal(err)
		}
		// The first turn records the deadline (and makes it Running).
		if _, err := client.WaitForStatusChange(ctx, id, "0.Pending.0.0"); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	st, err := client.Inspect(ctx, "timed", nil)
	if err != nil || st.Deadline == nil {
		t.Fatalf("Inspect: %+v, %v; want a deadline", st, err)
	}
	r := runCLI(t, "status", "timed", "--db", db).wantCode(t, 0)
	for _, want := range []string{"Deadline:", " " + formatTime(*st.Deadline) + " (in "} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("status lacks %q:\n%s", want, r.stdout)
		}
	}
	var got duroxide.Status
	runCLI(t, "status", "timed", "--json", "--db", db).wantCode(t, 0).decode(t, &got)
	if got.Deadline == nil || !got.Deadline.Equal(*st.Deadline) {
		t.Fatalf("status --json: deadline %v, want %v", got.Deadline, *st.Deadline)
	}
	if r := runCLI(t, "status", "untimed", "--db", db).wantCode(t, 0); strings.Contains(r.stdout, "Deadline") {
		t.Fatalf("status of an instance without a timeout shows a deadline:\n%s", r.stdout)
	}
}
