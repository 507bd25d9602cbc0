package providertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

// Activities: outputs, failures, panics, payload types.
var e2eActivityCases = []e2eCase{
	{"ActivityOutput", e2eActivityOutput},
	{"ActivityErrorCaught", e2eActivityErrorCaught},
	{"ActivityErrorFailsOrchestration", e2eActivityErrorFailsOrchestration},
	{"ActivityPanic", e2eActivityPanic},
	{"ActivityStructPayloads", e2eActivityStructPayloads},
	{"ActivityJSONTypes", e2eActivityJSONTypes},
	{"ActivityNilPayloads", e2eActivityNilPayloads},
	{"ActivityContextInfo", e2eActivityContextInfo},
	{"ActivityUnregistered", e2eActivityUnregistered},
	{"ActivityOnSession", e2eActivityOnSession},
	{"ActivitySessionFailover", e2eActivitySessionFailover},
	{"LongActivityKeepsItsLock", e2eLongActivityKeepsLock},
	{"OrchestrationErrorFails", e2eOrchestrationErrorFails},
	{"OrchestrationPanicFails", e2eOrchestrationPanicFails},
	{"PayloadEncodingErrors", e2ePayloadEncodingErrors},
	{"PayloadTypeMismatch", e2ePayloadTypeMismatch},
	{"LargePayload", e2eLargePayload},
}

func helloRegistry() *duroxide.Registry {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		var msg string
		if err := ctx.ScheduleActivity("Hello", name).Await(&msg); err != nil {
			return "", err
		}
		return msg, nil
	})
	duroxide.RegisterActivity(reg, "Hello", func(_ context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	return reg
}

func e2eActivityOutput(e *e2e) {
	e.runtime(helloRegistry())
	e.start("greet", "Greet", "Ada")
	var out string
	st := e.result("greet", &out)
	if out != "Hello, Ada!" {
		e.t.Fatalf("output %q, want %q", out, "Hello, Ada!")
	}
	if st.Orchestration != "Greet" || st.ExecutionID != 1 || st.Version != duroxide.DefaultVersion || string(st.Input) != `"Ada"` {
		e.t.Fatalf("status fields: %s orchestration=%s input=%s", describeStatus(st), st.Orchestration, st.Input)
	}
	h := e.history("greet", 0)
	e.checkHistory(h)
	e.wantKinds(h, history.OrchestrationStarted, history.ActivityScheduled, history.ActivityCompleted, history.OrchestrationCompleted)
	if h[1].Name != "Hello" || string(h[1].Input) != `"Ada"` || h[2].SourceEventID != h[1].EventID || string(h[2].Output) != `"Hello, Ada!"` {
		e.t.Fatalf("activity events: %+v %+v", h[1], h[2])
	}
	if h[0].Name != "Greet" || h[0].Version != duroxide.DefaultVersion || string(h[3].Output) != `"Hello, Ada!"` {
		e.t.Fatalf("start/complete events: %+v %+v", h[0], h[3])
	}
}

func e2eActivityErrorCaught(e *e2e) {
	reg := duroxide.NewRegistry()
	type caught struct {
		Name, Kind, Message, Type string
		ID                        int64
		Canceled                  bool
	}
	duroxide.RegisterOrchestration(reg, "Catch", func(ctx *duroxide.OrchestrationContext, _ any) (caught, error) {
		err := ctx.ScheduleActivity("Boom", 7).Await(nil)
		var ae *duroxide.ActivityError
		if !errors.As(err, &ae) {
			return caught{}, fmt.Errorf("want *ActivityError, got %T %v", err, err)
		}
		return caught{ae.Name, ae.Kind, ae.Message, ae.Type, ae.ActivityID, errors.Is(err, duroxide.ErrCanceled)}, nil
	})
	duroxide.RegisterActivity(reg, "Boom", func(_ context.Context, code int) (string, error) {
		return "", &e2eError{Code: code}
	})
	e.runtime(reg)
	e.start("catch", "Catch", nil)
	var out caught
	e.result("catch", &out)
	want := caught{Name: "Boom", Kind: "application", Message: "e2e failure code 7", Type: "*providertest.e2eError", ID: 2}
	if out != want {
		e.t.Fatalf("caught %+v, want %+v", out, want)
	}
	h := e.history("catch", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.ActivityScheduled, history.ActivityFailed, history.OrchestrationCompleted)
	if f := h[2].Error; f == nil || f.Kind != history.ErrorApplication || f.Message != "e2e failure code 7" {
		e.t.Fatalf("ActivityFailed error %+v", f)
	}
}

func e2eActivityErrorFailsOrchestration(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Propagate", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "", ctx.ScheduleActivity("Boom", 3).Await(nil)
	})
	duroxide.RegisterActivity(reg, "Boom", func(_ context.Context, code int) (string, error) {
		return "", &e2eError{Code: code}
	})
	e.runtime(reg)
	e.start("prop", "Propagate", nil)
	oe := e.failed("prop")
	if oe.Info.Kind != "application" || !strings.Contains(oe.Info.Message, "e2e failure code 3") {
		e.t.Fatalf("failure %+v", oe.Info)
	}
	if errors.Is(oe, duroxide.ErrCanceled) {
		e.t.Fatal("a failed instance matches ErrCanceled")
	}
	h := e.history("prop", 0)
	e.wantKinds(h, history.OrchestrationStarted, history.ActivityScheduled, history.ActivityFailed, history.OrchestrationFailed)
	if h[3].Error == nil || h[3].Error.Kind != history.ErrorApplication {
		e.t.Fatalf("OrchestrationFailed error %+v", h[3].Error)
	}
}

func e2eActivityPanic(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Panicky", func(ctx *duroxide.OrchestrationContext, _ any) (duroxide.ActivityError, error) {
		err := ctx.ScheduleActivity("Panic", nil).Await(nil)
		var ae *duroxide.ActivityError
		if !errors.As(err, &ae) {
			return duroxide.ActivityError{}, fmt.Errorf("want *ActivityError, got %v", err)
		}
		return *ae, nil
	})
	duroxide.RegisterActivity(reg, "Panic", func(context.Context, any) (any, error) {
		panic("kaboom")
	})
	e.runtime(reg)
	e.start("panic", "Panicky", nil)
	var ae duroxide.ActivityError
	e.result("panic", &ae)
	if ae.Kind != "application" || !strings.Contains(ae.Message, "kaboom") || ae.Type != "panic" {
		e.t.Fatalf("panic failure %+v", ae)
	}
	if !strings.Contains(ae.Details, "goroutine") || !strings.Contains(ae.Details, "e2e_activities.go") {
		e.t.Fatalf("panic details lack a stack trace naming the activity: %q", ae.Details)
	}
}

type e2eOrder struct {
	ID       string            `json:"id"`
	Items    []e2eItem         `json:"items"`
	Tags     map[string]string `json:"tags"`
	Placed   time.Time         `json:"placed"`
	Express  bool              `json:"express"`
	Discount *float64          `json:"discount,omitempty"`
}

type e2eItem struct {
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Price float64
}

type e2eReceipt struct {
	OrderID string
	Total   float64
	Lines   int
	Order   e2eOrder
}

func e2eActivityStructPayloads(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Checkout", func(ctx *duroxide.OrchestrationContext, o e2eOrder) (*e2eReceipt, error) {
		var r e2eReceipt
		if err := ctx.ScheduleActivity("Price", o).Await(&r); err != nil {
			return nil, err
		}
		return &r, nil
	})
	duroxide.RegisterActivity(reg, "Price", func(_ context.Context, o e2eOrder) (e2eReceipt, error) {
		total := 0.0
		for _, it := range o.Items {
			total += float64(it.Qty) * it.Price
		}
		if o.Discount != nil {
			total -= *o.Discount
		}
		return e2eReceipt{OrderID: o.ID, Total: total, Lines: len(o.Items), Order: o}, nil
	})
	e.runtime(reg)
	disc := 1.5
	order := e2eOrder{ID: "o-1", Items: []e2eItem{{"a", 2, 2.25}, {"b", 1, 10}}, Tags: map[string]string{"k": "v", "ü": "☃"},
		Placed: time.Date(2025, 12, 24, 18, 0, 0, 123000000, time.UTC), Express: true, Discount: &disc}
	e.start("checkout", "Checkout", order)
	var r e2eReceipt
	st := e.result("checkout", &r)
	if r.OrderID != "o-1" || r.Total != 13 || r.Lines != 2 || !reflect.DeepEqual(r.Order, order) {
		e.t.Fatalf("receipt %+v", r)
	}
	var in e2eOrder
	if err := json.Unmarshal(st.Input, &in); err != nil || !reflect.DeepEqual(in, order) {
		e.t.Fatalf("status input %s (%v)", st.Input, err)
	}
}

func e2eActivityJSONTypes(e *e2e) {
	type all struct {
		I   int
		F   float64
		B   bool
		S   string
		L   []string
		M   map[string]int
		Raw json.RawMessage
		Big int64
	}
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Types", func(ctx *duroxide.OrchestrationContext, _ any) (all, error) {
		var a all
		var err error
		get := func(name string, in, out any) {
			if err == nil {
				err = ctx.ScheduleActivity(name, in).Await(out)
			}
		}
		get("Int", 41, &a.I)
		get("Float", 1.25, &a.F)
		get("Bool", false, &a.B)
		get("String", "ab\"c", &a.S)
		get("List", []string{"x", "y"}, &a.L)
		get("Map", map[string]int{"a": 1}, &a.M)
		get("Raw", json.RawMessage(`{"z":[1,2,{"q":null}]}`), &a.Raw)
		get("Big", int64(1)<<53, &a.Big)
		return a, err
	})
	duroxide.RegisterActivity(reg, "Int", func(_ context.Context, n int) (int, error) { return n + 1, nil })
	duroxide.RegisterActivity(reg, "Float", func(_ context.Context, f float64) (float64, error) { return f * 2, nil })
	duroxide.RegisterActivity(reg, "Bool", func(_ context.Context, b bool) (bool, error) { return !b, nil })
	duroxide.RegisterActivity(reg, "String", func(_ context.Context, s string) (string, error) { return s + "!", nil })
	duroxide.RegisterActivity(reg, "List", func(_ context.Context, l []string) ([]string, error) { return append(l, "z"), nil })
	duroxide.RegisterActivity(reg, "Map", func(_ context.Context, m map[string]int) (map[string]int, error) {
		m["b"] = 2
		return m, nil
	})
	duroxide.RegisterActivity(reg, "Raw", func(_ context.Context, r json.RawMessage) (json.RawMessage, error) { return r, nil })
	duroxide.RegisterActivity(reg, "Big", func(_ context.Context, n int64) (int64, error) { return n + 1, nil })
	e.runtime(reg)
	e.start("types", "Types", nil)
	var a all
	e.result("types", &a)
	want := all{I: 42, F: 2.5, B: true, S: "ab\"c!", L: []string{"x", "y", "z"}, M: map[string]int{"a": 1, "b": 2},
		Raw: json.RawMessage(`{"z":[1,2,{"q":null}]}`), Big: 1<<53 + 1}
	if jsonOf(e.t, a) != jsonOf(e.t, want) {
		e.t.Fatalf("got %s\nwant %s", jsonOf(e.t, a), jsonOf(e.t, want))
	}
}

func e2eActivityNilPayloads(e *e2e) {
	type opt struct{ V *string }
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Nils", func(ctx *duroxide.OrchestrationContext, in *opt) ([]string, error) {
		if in != nil {
			return nil, fmt.Errorf("input %+v, want nil", in)
		}
		var p *opt
		if err := ctx.ScheduleActivity("NilOut", nil).Await(&p); err != nil {
			return nil, err
		}
		var s string
		if err := ctx.ScheduleActivity("Describe", (*opt)(nil)).Await(&s); err != nil {
			return nil, err
		}
		// A nil out discards the result.
		if err := ctx.ScheduleActivity("NilOut", nil).Await(nil); err != nil {
			return nil, err
		}
		return []string{fmt.Sprint(p == nil), s}, nil
	})
	duroxide.RegisterActivity(reg, "NilOut", func(_ context.Context, _ any) (*opt, error) { return nil, nil })
	duroxide.RegisterActivity(reg, "Describe", func(_ context.Context, in *opt) (string, error) {
		return fmt.Sprint(in == nil), nil
	})
	e.runtime(reg)
	e.start("nils", "Nils", nil)
	var out []string
	st := e.result("nils", &out)
	if jsonOf(e.t, out) != `["true","true"]` {
		e.t.Fatalf("output %v", out)
	}
	if len(st.Input) != 0 {
		e.t.Fatalf("nil input stored as %s", st.Input)
	}
	h := e.history("nils", 0)
	nilOut := map[int64]bool{}
	for _, ev := range find(h, history.ActivityScheduled) {
		if len(ev.Input) != 0 {
			e.t.Fatalf("nil activity input stored as %s", ev.Input)
		}
		nilOut[ev.EventID] = ev.Name == "NilOut"
	}
	for _, ev := range find(h, history.ActivityCompleted) {
		if nilOut[ev.SourceEventID] && len(ev.Output) != 0 {
			e.t.Fatalf("nil activity output stored as %s", ev.Output)
		}
	}
}

func e2eActivityContextInfo(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Info", func(ctx *duroxide.OrchestrationContext, _ any) (duroxide.ActivityContext, error) {
		// A timer first, so the activity is not the first event after the start.
		if err := ctx.ScheduleTimer(0).Await(nil); err != nil {
			return duroxide.ActivityContext{}, err
		}
		var ac duroxide.ActivityContext
		err := ctx.ScheduleActivity("Who", nil).Await(&ac)
		return ac, err
	})
	duroxide.RegisterActivity(reg, "Who", func(ctx context.Context, _ any) (duroxide.ActivityContext, error) {
		ac := duroxide.ActivityContextFrom(ctx)
		if ac == nil {
			return duroxide.ActivityContext{}, errors.New("no activity context")
		}
		return *ac, nil
	})
	if duroxide.ActivityContextFrom(context.Background()) != nil {
		e.t.Fatal("ActivityContextFrom outside an activity is not nil")
	}
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID = "worker-e2e" })
	e.start("info", "Info", nil)
	var ac duroxide.ActivityContext
	e.result("info", &ac)
	h := e.history("info", 0)
	sched := find(h, history.ActivityScheduled)
	if len(sched) != 1 {
		e.t.Fatalf("history %v", eventKinds(h))
	}
	want := duroxide.ActivityContext{InstanceID: "info", ExecutionID: 1, ActivityID: sched[0].EventID, Name: "Who", Attempt: 1, WorkerID: "worker-e2e"}
	if ac != want {
		e.t.Fatalf("activity context %+v, want %+v", ac, want)
	}
}

// An activity that no runtime registers is never delivered: it waits,
// reported as unserved, until a deploy brings a runtime that registers it
// (a rolling deploy), which runs it at its first delivery.
func e2eActivityUnregistered(e *e2e) {
	calls := func(reg *duroxide.Registry) {
		duroxide.RegisterOrchestration(reg, "CallsGhost", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
			var s string
			err := ctx.ScheduleActivity("Ghost", nil).Await(&s)
			return s, err
		})
	}
	old := duroxide.NewRegistry()
	calls(old)
	e.runtime(old, func(o *duroxide.RuntimeOptions) {
		o.MaxAttempts = 3
		o.BackoffBase = 100 * time.Millisecond
		o.BackoffMax = time.Second
	})
	e.start("ghost", "CallsGhost", nil)
	e.eventually("Ghost to be reported unserved", func() bool {
		w, ok := e.activityWait("ghost", "Ghost")
		return ok && w.Unserved
	})
	// Time passes: the old runtime never takes the activity (deliveries
	// would fail it as "configuration" after MaxAttempts).
	e.fc.Advance(time.Minute)
	e.eventually("the old runtime to announce itself again", func() bool {
		w, _ := e.activityWait("ghost", "Ghost")
		return w.Unserved
	})
	if w, _ := e.activityWait("ghost", "Ghost"); w.Deliveries != 0 {
		e.t.Fatalf("the unregistered activity was delivered: %+v", w)
	}
	next := duroxide.NewRegistry()
	calls(next)
	duroxide.RegisterActivity(next, "Ghost", func(ctx context.Context, _ any) (string, error) {
		return fmt.Sprintf("boo, attempt %d", duroxide.ActivityContextFrom(ctx).Attempt), nil
	})
	e.runtime(next)
	var out string
	e.result("ghost", &out)
	if out != "boo, attempt 1" {
		e.t.Fatalf("output %q, want the new runtime to run it at its first delivery", out)
	}
}

func e2eActivityOnSession(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Sessions", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		var ts []*duroxide.Task
		for i := range 6 {
			ts = append(ts, ctx.ScheduleActivityOnSession("Where", i, fmt.Sprintf("s%d", i%2)))
		}
		var out []string
		for _, t := range ts {
			var s string
			if err := t.Await(&s); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	})
	duroxide.RegisterActivity(reg, "Where", func(ctx context.Context, i int) (string, error) {
		ac := duroxide.ActivityContextFrom(ctx)
		return fmt.Sprintf("%d@%s/%s", i, ac.SessionID, ac.WorkerID), nil
	})
	e.runtime(reg, func(o *duroxide.RuntimeOptions) { o.WorkerID = "node-a" })
	e.start("sess", "Sessions", nil)
	var out []string
	e.result("sess", &out)
	want := []string{"0@s0/node-a", "1@s1/node-a", "2@s0/node-a", "3@s1/node-a", "4@s0/node-a", "5@s1/node-a"}
	if jsonOf(e.t, out) != jsonOf(e.t, want) {
		e.t.Fatalf("output %v, want %v", out, want)
	}
	for _, ev := range find(e.history("sess", 0), history.ActivityScheduled) {
		if ev.SessionID == "" {
			e.t.Fatalf("ActivityScheduled %d has no session", ev.EventID)
		}
	}
}

func e2eOrchestrationErrorFails(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Refuse", func(ctx *duroxide.OrchestrationContext, why string) (string, error) {
		return "", &e2eError{Code: len(why)}
	})
	e.runtime(reg)
	e.start("refuse", "Refuse", "four")
	oe := e.failed("refuse")
	if oe.Info.Kind != "application" || oe.Info.Message != "e2e failure code 4" || oe.Info.Type != "*providertest.e2eError" {
		e.t.Fatalf("failure %+v", oe.Info)
	}
	if oe.InstanceID != "refuse" || oe.State != duroxide.StateFailed {
		e.t.Fatalf("orchestration error %+v", oe)
	}
	e.wantKinds(e.history("refuse", 0), history.OrchestrationStarted, history.OrchestrationFailed)
}

func e2eOrchestrationPanicFails(e *e2e) {
	reg := duroxide.NewRegistry()
	var mu sync.Mutex
	runs := 0
	duroxide.RegisterOrchestration(reg, "Explode", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		if err := ctx.ScheduleActivity("Hello", "x").Await(nil); err != nil {
			return "", err
		}
		panic("orchestration exploded")
	})
	duroxide.RegisterActivity(reg, "Hello", func(_ context.Context, s string) (string, error) { return s, nil })
	e.runtime(reg)
	e.start("explode", "Explode", nil)
	oe := e.failed("explode")
	if oe.Info.Kind != "application" || !strings.Contains(oe.Info.Message, "orchestration exploded") ||
		oe.Info.Type != "panic" || !strings.Contains(oe.Info.Details, "goroutine") {
		e.t.Fatalf("panic failure %+v", oe.Info)
	}
	e.wantKinds(e.history("explode", 0), history.OrchestrationStarted, history.ActivityScheduled, history.ActivityCompleted, history.OrchestrationFailed)
}

func e2ePayloadEncodingErrors(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Encode", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
		var out []string
		// An input that cannot be encoded fails the task at once, without
		// scheduling anything.
		err := ctx.ScheduleActivity("Hello", make(chan int)).Await(nil)
		var ae *duroxide.ActivityError
		out = append(out, fmt.Sprintf("input: invalid=%v activityError=%v", errors.Is(err, duroxide.ErrInvalidArgument), errors.As(err, &ae)))
		// An output the activity cannot encode is the activity's failure.
		err = ctx.ScheduleActivity("BadOut", nil).Await(nil)
		out = append(out, fmt.Sprintf("output: activityError=%v", errors.As(err, &ae) && ae.Kind == "application"))
		return out, nil
	})
	duroxide.RegisterOrchestration(reg, "BadResult", func(ctx *duroxide.OrchestrationContext, _ any) (func(), error) {
		return func() {}, nil
	})
	duroxide.RegisterActivity(reg, "Hello", func(_ context.Context, s string) (string, error) { return s, nil })
	duroxide.RegisterActivity(reg, "BadOut", func(context.Context, any) (chan int, error) { return make(chan int), nil })
	e.runtime(reg)
	e.start("enc", "Encode", nil)
	var out []string
	e.result("enc", &out)
	if jsonOf(e.t, out) != `["input: invalid=true activityError=false","output: activityError=true"]` {
		e.t.Fatalf("output %v", out)
	}
	if n := count(e.history("enc", 0), history.ActivityScheduled); n != 1 {
		e.t.Fatalf("%d activities scheduled, want 1 (the unencodable input schedules nothing)", n)
	}
	e.start("badres", "BadResult", nil)
	if oe := e.failed("badres"); oe.Info.Kind != "application" {
		e.t.Fatalf("unencodable result: %+v", oe.Info)
	}
}

func e2ePayloadTypeMismatch(e *e2e) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Mismatch", func(ctx *duroxide.OrchestrationContext, _ any) ([]bool, error) {
		// The activity cannot decode its input: its failure.
		err1 := ctx.ScheduleActivity("WantsInt", "not a number").Await(nil)
		var ae *duroxide.ActivityError
		inputFailed := errors.As(err1, &ae) && strings.Contains(ae.Message, "decoding input")
		// The orchestration cannot decode the output: an error, not the
		// activity's failure.
		var n int
		err2 := ctx.ScheduleActivity("GivesString", nil).Await(&n)
		outputFailed := err2 != nil && !errors.As(err2, &ae)
		return []bool{inputFailed, outputFailed}, nil
	})
	duroxide.RegisterOrchestration(reg, "WantsIntInput", func(ctx *duroxide.OrchestrationContext, n int) (int, error) { return n, nil })
	duroxide.RegisterActivity(reg, "WantsInt", func(_ context.Context, n int) (int, error) { return n, nil })
	duroxide.RegisterActivity(reg, "GivesString", func(context.Context, any) (string, error) { return "x", nil })
	e.runtime(reg)
	e.start("mm", "Mismatch", nil)
	var out []bool
	e.result("mm", &out)
	if jsonOf(e.t, out) != `[true,true]` {
		e.t.Fatalf("mismatches detected: %v", out)
	}
	e.start("badin", "WantsIntInput", "abc")
	if oe := e.failed("badin"); !strings.Contains(oe.Info.Message, "decoding input") {
		e.t.Fatalf("undecodable orchestration input: %+v", oe.Info)
	}
}

func e2eLargePayload(e *e2e) {
	big := strings.Repeat("0123456789abcdef", 32<<10) // 512 KiB
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Big", func(ctx *duroxide.OrchestrationContext, s string) (string, error) {
		var r string
		err := ctx.ScheduleActivity("Reverse", s).Await(&r)
		return r, err
	})
	duroxide.RegisterActivity(reg, "Reverse", func(_ context.Context, s string) (string, error) {
		b := []byte(s)
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		return string(b), nil
	})
	e.runtime(reg)
	e.start("big", "Big", big)
	var out string
	e.result("big", &out)
	if len(out) != len(big) || out[:16] != "fedcba9876543210" {
		e.t.Fatalf("output of %d bytes starting %q", len(out), out[:min(16, len(out))])
	}
}

func e2eActivitySessionFailover(e *e2e) {
	reg := func() *duroxide.Registry {
		reg := duroxide.NewRegistry()
		duroxide.RegisterOrchestration(reg, "Pinned", func(ctx *duroxide.OrchestrationContext, _ any) ([]string, error) {
			var a, b string
			if err := ctx.ScheduleActivityOnSession("Where", "first", "s").Await(&a); err != nil {
				return nil, err
			}
			if err := ctx.WaitForEvent("next").Await(nil); err != nil {
				return nil, err
			}
			if err := ctx.ScheduleActivityOnSession("Where", "second", "s").Await(&b); err != nil {
				return nil, err
			}
			return []string{a, b}, nil
		})
		duroxide.RegisterActivity(reg, "Where", func(ctx context.Context, s string) (string, error) {
			return s + "@" + duroxide.ActivityContextFrom(ctx).WorkerID, nil
		})
		return reg
	}
	rtA := e.runtime(reg(), func(o *duroxide.RuntimeOptions) { o.WorkerID = "node-a"; o.SessionLockTimeout = 5 * time.Second })
	e.start("pin", "Pinned", nil)
	e.waitEvents("pin", history.ExternalSubscribed, 1)
	e.shutdown(rtA)
	// node-a is gone; its session lease lapses and node-b takes the session over.
	e.runtime(reg(), func(o *duroxide.RuntimeOptions) { o.WorkerID = "node-b"; o.SessionLockTimeout = 5 * time.Second })
	if err := e.c.RaiseEvent(e.ctx, "pin", "next", nil); err != nil {
		e.t.Fatal(err)
	}
	st := e.stepUntilDone("pin", 500*time.Millisecond)
	var out []string
	if err := st.Decode(&out); err != nil || jsonOf(e.t, out) != `["first@node-a","second@node-b"]` {
		e.t.Fatalf("output %v (%v) %s", out, err, describeStatus(st))
	}
}

func e2eLongActivityKeepsLock(e *e2e) {
	g := newGate()
	var runs atomic.Int32
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Long", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		var s string
		err := ctx.ScheduleActivity("Slow", nil).Await(&s)
		return s, err
	})
	duroxide.RegisterActivity(reg, "Slow", func(ctx context.Context, _ any) (string, error) {
		n := runs.Add(1)
		if err := g.wait(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("run %d", n), nil
	})
	// The runtime works through a store that notes each renewal of a worker
	// lock, so the fake clock can be held back until a renewal lands: a
	// slow store call (PostgreSQL under load) must not look like an expired
	// lock. The clock never runs more than half a lock timeout past the
	// last renewal; the lock expires a whole timeout after it.
	rs := &renewSpy{Provider: e.store, clock: e.fc}
	o := e.options()
	o.WorkerLockTimeout = 6 * time.Second
	rt, err := duroxide.StartRuntime(e.ctx, rs, reg, o)
	if err != nil {
		e.t.Fatalf("StartRuntime: %v", err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Shutdown(ctx); err != nil {
			e.t.Errorf("Shutdown: %v", err)
		}
	})
	e.start("long", "Long", nil)
	e.eventually("the activity to start", func() bool { return runs.Load() == 1 })
	// Three lock timeouts pass while it runs: renewals (every 2s) keep the
	// lock.
	begin := e.fc.Now()
	last := begin
	for e.fc.Now().Sub(begin) < 18*time.Second {
		if at, n := rs.last(); n > 0 && at.After(last) {
			last = at
		}
		if e.fc.Now().Sub(last) >= 3*time.Second {
			before := rs.count()
			e.eventually("a renewal of the activity's lock", func() bool { return rs.count() > before })
			continue
		}
		e.fc.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	if n := rs.count(); n < 6 {
		e.t.Fatalf("%d renewals in 18s of 2s renewal ticks", n)
	}
	g.open()
	var out string
	e.result("long", &out)
	if out != "run 1" || runs.Load() != 1 {
		e.t.Fatalf("output %q after %d runs: a renewed lock must not be redelivered", out, runs.Load())
	}
}

// renewSpy is a store that notes when worker locks are renewed (the fake
// time of the last success and how many), and passes NextVisible on.
type renewSpy struct {
	provider.Provider
	clock interface{ Now() time.Time }

	mu sync.Mutex
	at time.Time
	n  int
}

func (r *renewSpy) RenewWorkItemLock(ctx context.Context, lockToken string, extendFor time.Duration) error {
	err := r.Provider.RenewWorkItemLock(ctx, lockToken, extendFor)
	if err == nil {
		r.mu.Lock()
		r.at, r.n = r.clock.Now(), r.n+1
		r.mu.Unlock()
	}
	return err
}

func (r *renewSpy) last() (time.Time, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at, r.n
}

func (r *renewSpy) count() int { _, n := r.last(); return n }

// NextVisible passes the store's Waker on, so the runtime sleeps as it
// would on the store itself.
func (r *renewSpy) NextVisible(ctx context.Context, q provider.Queue) (time.Time, error) {
	if w, ok := r.Provider.(provider.Waker); ok {
		return w.NextVisible(ctx, q)
	}
	return time.Time{}, nil
}
