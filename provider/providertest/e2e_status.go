package providertest

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
)

// Custom status, recorded values (Now, NewGUID), replay awareness.
var e2eStatusCases = []e2eCase{
	{"CustomStatusLifecycle", e2eCustomStatus},
	{"NowAndGUIDRecorded", e2eNowGUIDRecorded},
	{"NowAndGUIDStableAcrossTurns", e2eNowGUIDStable},
	{"LoggerSilentDuringReplay", e2eLoggerSilent},
	{"ContextIdentity", e2eContextIdentity},
}

func e2eCustomStatus(e *e2e) {
	type progress struct {
		Step int
		Note string
	}
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Progress", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		ctx.SetCustomStatus("starting")
		if err := ctx.WaitForEvent("next").Await(nil); err != nil {
			return "", err
		}
		ctx.SetCustomStatus(progress{2, "halfway"})
		if err := ctx.WaitForEvent("next").Await(nil); err != nil {
			return "", err
		}
		ctx.SetCustomStatus(nil)
		if err := ctx.WaitForEvent("next").Await(nil); err != nil {
			return "", err
		}
		ctx.SetCustomStatus("finished")
		return "done", nil
	})
	e.runtime(reg)
	e.start("prog", "Progress", nil)
	next := func(n int) {
		e.t.Helper()
		e.waitEvents("prog", history.ExternalSubscribed, n)
	}
	raise := func() {
		e.t.Helper()
		if err := e.c.RaiseEvent(e.ctx, "prog", "next", nil); err != nil {
			e.t.Fatal(err)
		}
	}
	next(1)
	if cs := e.status("prog").CustomStatus; string(cs) != `"starting"` {
		e.t.Fatalf("custom status %s, want \"starting\"", cs)
	}
	raise()
	next(2)
	if cs := e.status("prog").CustomStatus; string(cs) != `{"Step":2,"Note":"halfway"}` {
		e.t.Fatalf("custom status %s", cs)
	}
	raise()
	next(3)
	if cs := e.status("prog").CustomStatus; len(cs) != 0 {
		e.t.Fatalf("custom status %s after clearing", cs)
	}
	raise()
	st := e.wait("prog")
	if string(st.CustomStatus) != `"finished"` || st.State != duroxide.StateCompleted {
		e.t.Fatalf("final status %s custom %s", describeStatus(st), st.CustomStatus)
	}
	if n := count(e.history("prog", 0), history.CustomStatusUpdated); n != 4 {
		e.t.Fatalf("%d CustomStatusUpdated events, want 4", n)
	}
}

func e2eNowGUIDRecorded(e *e2e) {
	type vals struct {
		Now1, Now2 time.Time
		G1, G2     string
	}
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Values", func(ctx *duroxide.OrchestrationContext, _ any) (vals, error) {
		v := vals{Now1: ctx.Now(), G1: ctx.NewGUID()}
		if err := ctx.ScheduleTimer(time.Minute).Await(nil); err != nil {
			return v, err
		}
		v.Now2, v.G2 = ctx.Now(), ctx.NewGUID()
		return v, nil
	})
	e.runtime(reg)
	e.start("vals", "Values", nil)
	e.waitEvents("vals", history.TimerCreated, 1)
	e.fc.Advance(time.Minute)
	st := e.advanceUntilDone("vals")
	var v vals
	if err := st.Decode(&v); err != nil {
		e.t.Fatalf("Decode: %v (%s)", err, describeStatus(st))
	}
	if !v.Now1.Equal(e2eStart) || v.Now2.Sub(v.Now1) < time.Minute {
		e.t.Fatalf("Now values %s, %s (start %s)", v.Now1, v.Now2, e2eStart)
	}
	if _, err := uuid.Parse(v.G1); err != nil || v.G1 == v.G2 {
		e.t.Fatalf("GUIDs %q, %q", v.G1, v.G2)
	}
	h := e.history("vals", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.NowRecorded, history.GUIDRecorded, history.TimerCreated,
		history.TimerFired, history.NowRecorded, history.GUIDRecorded, history.OrchestrationCompleted)
	if h[1].TimeMs != v.Now1.UnixMilli() || h[5].TimeMs != v.Now2.UnixMilli() || h[2].GUID != v.G1 || h[6].GUID != v.G2 {
		e.t.Fatalf("recorded values differ from the returned ones: %+v %+v %+v %+v", h[1], h[2], h[5], h[6])
	}
}

func e2eNowGUIDStable(e *e2e) {
	var mu sync.Mutex
	seen := map[string][]string{} // value name -> values observed by every run of the code
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Stable", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		g := ctx.NewGUID()
		n := ctx.Now().Format(time.RFC3339Nano)
		mu.Lock()
		seen["guid"] = append(seen["guid"], g)
		seen["now"] = append(seen["now"], n)
		mu.Unlock()
		var echoes []string
		for range 3 {
			// Each event is a new turn; without the cache the code replays
			// from the start and must get the same values back.
			if err := ctx.WaitForEvent("tick").Await(nil); err != nil {
				return nil, err
			}
			var s string
			if err := ctx.ScheduleActivity("Echo", g+"@"+n).Await(&s); err != nil {
				return nil, err
			}
			echoes = append(echoes, s)
		}
		return echoes, nil
	})
	duroxide.RegisterActivity(reg, "Echo", func(_ context.Context, s string) (string, error) { return s, nil })
	e.runtime(reg)
	e.start("stable", "Stable", nil)
	for i := 1; i <= 3; i++ {
		e.waitEvents("stable", history.ExternalSubscribed, i)
		e.fc.Advance(time.Minute) // the clock moves between turns
		if err := e.c.RaiseEvent(e.ctx, "stable", "tick", i); err != nil {
			e.t.Fatal(err)
		}
	}
	var echoes []string
	e.result("stable", &echoes)
	mu.Lock()
	defer mu.Unlock()
	want := seen["guid"][0] + "@" + seen["now"][0]
	for _, s := range echoes {
		if s != want {
			e.t.Fatalf("echoes %v, want all %q", echoes, want)
		}
	}
	for k, vs := range seen {
		for _, v := range vs {
			if v != vs[0] {
				e.t.Fatalf("%s changed across runs of the code: %v", k, vs)
			}
		}
	}
	if e.nocache && len(seen["guid"]) < 4 {
		e.t.Fatalf("without the cache the code should have replayed on every turn; it ran %d times", len(seen["guid"]))
	}
	if !e.nocache && len(seen["guid"]) != 1 {
		e.t.Logf("with the cache the code ran %d times (cache misses replay)", len(seen["guid"]))
	}
	h := e.history("stable", 0)
	if count(h, history.GUIDRecorded) != 1 || count(h, history.NowRecorded) != 1 {
		e.t.Fatalf("history %v", eventKinds(h))
	}
}

// recordingHandler counts log records by message.
type recordingHandler struct {
	mu   *sync.Mutex
	msgs map[string]int
	next slog.Handler
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "orch:") {
		h.mu.Lock()
		h.msgs[r.Message]++
		h.mu.Unlock()
		return nil
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &recordingHandler{mu: h.mu, msgs: h.msgs, next: h.next.WithAttrs(as)}
}

func (h *recordingHandler) WithGroup(n string) slog.Handler {
	return &recordingHandler{mu: h.mu, msgs: h.msgs, next: h.next.WithGroup(n)}
}

func e2eLoggerSilent(e *e2e) {
	rec := &recordingHandler{mu: &sync.Mutex{}, msgs: map[string]int{}, next: e.log.Handler()}
	var mu sync.Mutex
	var replaying []bool
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Chatty", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		for _, step := range []string{"orch:one", "orch:two", "orch:three"} {
			mu.Lock()
			replaying = append(replaying, ctx.IsReplaying())
			mu.Unlock()
			ctx.Logger().Info(step)
			if err := ctx.WaitForEvent("next").Await(nil); err != nil {
				return "", err
			}
		}
		ctx.Logger().Warn("orch:done")
		return "ok", nil
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.Logger = slog.New(rec) })
	e.start("chatty", "Chatty", nil)
	for i := 1; i <= 3; i++ {
		e.waitEvents("chatty", history.ExternalSubscribed, i)
		if err := e.c.RaiseEvent(e.ctx, "chatty", "next", nil); err != nil {
			e.t.Fatal(err)
		}
	}
	e.wait("chatty")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, m := range []string{"orch:one", "orch:two", "orch:three", "orch:done"} {
		if rec.msgs[m] != 1 {
			e.t.Fatalf("%q logged %d times, want once: %v", m, rec.msgs[m], rec.msgs)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	nReplaying := 0
	for _, r := range replaying {
		if r {
			nReplaying++
		}
	}
	if e.nocache && nReplaying == 0 {
		e.t.Fatalf("IsReplaying never true without the cache: %v", replaying)
	}
	if len(replaying)-nReplaying != 3 {
		e.t.Fatalf("each step must run live exactly once: %v", replaying)
	}
}

func e2eContextIdentity(e *e2e) {
	type ident struct {
		Instance, Name, Version string
		Execution               int64
	}
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestrationVersion(reg, "Who", "1.2.3", func(ctx *duroxide.OrchestrationContext, round int) (ident, error) {
		if round == 1 {
			return ident{}, ctx.ContinueAsNew(2)
		}
		return ident{ctx.InstanceID(), ctx.Name(), ctx.Version(), ctx.ExecutionID()}, nil
	})
	e.runtime(reg)
	e.start("who", "Who", 1)
	var out ident
	e.result("who", &out)
	if out != (ident{"who", "Who", "1.2.3", 2}) {
		e.t.Fatalf("identity %+v", out)
	}
	if _, err := e.c.GetStatus(e.ctx, "nobody"); !errors.Is(err, duroxide.ErrNotFound) {
		e.t.Fatalf("GetStatus of an unknown instance: %v", err)
	}
}
