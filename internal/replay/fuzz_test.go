package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
)

// bytesource hands out fuzz bytes, then zeros.
type bytesource struct {
	b []byte
	i int
}

func (s *bytesource) next() byte {
	if s.i >= len(s.b) {
		return 0
	}
	s.i++
	return s.b[s.i-1]
}

// programFunc interprets its input (a byte string) as an orchestration
// program. It uses every kind of task, Select, recorded values, custom
// status, retries and ContinueAsNew, and is deterministic in its input.
func programFunc(ctx *Context, input json.RawMessage) (json.RawMessage, error) {
	var prog []byte
	if err := json.Unmarshal(input, &prog); err != nil {
		return nil, err
	}
	var pending []*Task
	trace := []string{}
	if len(prog)%3 == 2 {
		pending = append(pending, ctx.CancelRequested())
	}
	for i, op := range prog {
		if op >= 192 { // the newer operations, kept apart so older seeds keep their meaning
			switch op % 4 {
			case 0, 3:
				if len(pending) > 0 {
					k := 0
					if op%4 == 0 {
						k = len(pending) - 1
					}
					ctx.Cancel(pending[k])
				}
			case 1:
				pending = append(pending, ctx.ScheduleActivityOptions("T", json.RawMessage(fmt.Sprint(i)), ActivityOptions{
					Retry:        &RetryPolicy{MaxAttempts: 2, InitialInterval: time.Second, Jitter: 0.5},
					StartToClose: time.Duration(op%7+1) * time.Second, ScheduleToClose: time.Duration(op%5+2) * time.Second,
				}))
			case 2:
				trace = append(trace, fmt.Sprintf("patched:%v", ctx.Patched(fmt.Sprint("p", op%3))))
			}
			continue
		}
		switch op % 12 {
		case 0, 1:
			pending = append(pending, ctx.ScheduleActivity("A", json.RawMessage(fmt.Sprint(i)), ""))
		case 2:
			pending = append(pending, ctx.ScheduleTimer(time.Duration(op)*time.Second))
		case 3:
			pending = append(pending, ctx.WaitForEvent(fmt.Sprintf("e%d", op%2)))
		case 4, 5:
			if len(pending) > 0 {
				t := pending[0]
				pending = pending[1:]
				ctx.Await(t)
				out, fail := t.Result()
				trace = append(trace, fmt.Sprintf("await:%s:%v", out, fail != nil))
			}
		case 6:
			if len(pending) > 0 {
				w := ctx.Select(pending...)
				out, _ := pending[w].Result()
				trace = append(trace, fmt.Sprintf("select:%d:%s", w, out))
				pending = append(pending[:w:w], pending[w+1:]...)
			}
		case 7:
			trace = append(trace, fmt.Sprintf("now:%d", ctx.Now().UnixMilli()))
		case 8:
			ctx.SetCustomStatus(json.RawMessage(fmt.Sprintf(`{"step":%d}`, i)))
		case 9:
			pending = append(pending, ctx.ScheduleSubOrchestration("Child", "", "", json.RawMessage(fmt.Sprint(i))))
		case 10:
			pending = append(pending, ctx.ScheduleActivityWithRetry("R", json.RawMessage(fmt.Sprint(i)), "",
				RetryPolicy{MaxAttempts: 3, InitialInterval: time.Second}))
		case 11:
			switch (op / 12) % 3 {
			case 0:
				return nil, fmt.Errorf("program fails at %d", i)
			case 1:
				return nil, ctx.ContinueAsNew(json.RawMessage(`[]`), "")
			default:
				panic("program panics")
			}
		}
	}
	for _, t := range pending {
		ctx.Await(t)
	}
	trace = append(trace, fmt.Sprintf("canceled:%v", ctx.Canceled()))
	return json.Marshal(trace)
}

// world simulates the store and the workers: it turns a turn's new
// schedules into completion messages, delivered later in an order chosen by
// the fuzzer, sometimes twice, alongside stale messages.
type world struct {
	src     *bytesource
	pending []history.WorkItem
	// canceled is set once the world has sent a cancel request.
	canceled bool
}

func (w *world) observe(delta []history.Event, id string) {
	for _, ev := range delta {
		var m history.WorkItem
		switch ev.Kind {
		case history.ActivityScheduled:
			if w.src.next()%4 == 0 {
				m = history.WorkItem{Kind: history.WorkActivityFailed, Error: &history.ErrorDetails{Kind: history.ErrorApplication, Message: "boom"}}
			} else {
				m = history.WorkItem{Kind: history.WorkActivityCompleted, Output: json.RawMessage(fmt.Sprintf(`"out%d"`, ev.EventID))}
			}
		case history.TimerCreated:
			m = history.WorkItem{Kind: history.WorkTimerFired, FireAtMs: ev.FireAtMs}
		case history.SubOrchestrationScheduled:
			m = history.WorkItem{Kind: history.WorkSubOrchCompleted, ChildInstanceID: ev.ChildInstanceID, Output: json.RawMessage(`"child"`)}
		case history.ExternalSubscribed:
			m = history.WorkItem{Kind: history.WorkExternalRaised, Name: ev.Name, Data: json.RawMessage(fmt.Sprintf(`"ev%d"`, ev.EventID))}
		case history.OrchestrationCancelRequested:
			if ev.FireAtMs == 0 {
				continue
			}
			m = history.WorkItem{Kind: history.WorkTimerFired, FireAtMs: ev.FireAtMs} // the grace deadline
		default:
			continue
		}
		m.InstanceID, m.ExecutionID, m.ID = id, 1, ev.EventID
		if m.Kind == history.WorkExternalRaised {
			m.ExecutionID, m.ID = 0, 0
		}
		w.pending = append(w.pending, m)
	}
}

// batch picks the next turn's messages.
func (w *world) batch() []history.WorkItem {
	var out []history.WorkItem
	n := int(w.src.next()%4) + 1
	for k := 0; k < n && len(w.pending) > 0; k++ {
		i := int(w.src.next()) % len(w.pending)
		m := w.pending[i]
		w.pending = append(w.pending[:i:i], w.pending[i+1:]...)
		out = append(out, m)
		switch w.src.next() % 8 {
		case 0: // at-least-once delivery: a duplicate
			out = append(out, m)
		case 1: // a stale completion from an older execution
			if m.ExecutionID != 0 {
				s := m
				s.ExecutionID = 7
				out = append(out, s)
			}
		case 2: // an unsolicited event
			out = append(out, history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: m.InstanceID, Name: "e1", Data: json.RawMessage(`"extra"`)})
		case 3: // a cancel request (once; later ones would be ignored)
			if !w.canceled {
				w.canceled = true
				out = append(out, history.WorkItem{Kind: history.WorkCancelInstance, InstanceID: m.InstanceID, Reason: "fuzz"})
			}
		}
	}
	return out
}

// eventsJSON encodes events for comparison, without panic stack traces
// (goroutine numbers differ between runs).
func eventsJSON(t *testing.T, evs []history.Event) []byte {
	evs = append([]history.Event(nil), evs...)
	for i := range evs {
		if evs[i].Error != nil && evs[i].Error.Details != "" {
			e := *evs[i].Error
			e.Details = "(stack)"
			evs[i].Error = &e
		}
	}
	b, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// runProgram drives one program to its end (or 60 turns), checking at
// every turn that a replay from scratch produces exactly what the live
// execution produced, and at the end that Verify accepts the history.
func runProgram(t *testing.T, prog, choices []byte) {
	const id = "fuzz"
	input, _ := json.Marshal(prog)
	cfg := Config{InstanceID: id, ExecutionID: 1, Func: programFunc}
	if len(prog)%2 == 0 {
		cfg.CancelGrace = time.Minute // otherwise a cancel request ends the execution at once
	}
	w := &world{src: &bytesource{b: choices}}
	live := New(cfg)
	defer live.Close()
	var stored []history.Event
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	started := &history.Event{Kind: history.OrchestrationStarted, Name: "Program", Version: "1.0.0", Input: input}
	for turn := 0; turn < 60; turn++ {
		in := TurnInput{Now: base.Add(time.Duration(turn) * time.Second), History: stored}
		if turn == 0 {
			in.Started = started
		} else {
			in.Messages = w.batch()
			if len(in.Messages) == 0 {
				break
			}
		}
		fresh := New(cfg)
		got, err := live.Turn(in)
		if err != nil {
			t.Fatalf("turn %d live: %v", turn, err)
		}
		want, err := fresh.Turn(in)
		fresh.Close()
		if err != nil {
			t.Fatalf("turn %d replay: %v", turn, err)
		}
		if got.Nondeterminism != nil || want.Nondeterminism != nil {
			t.Fatalf("turn %d: nondeterminism in a deterministic program: live %v, replay %v", turn, got.Nondeterminism, want.Nondeterminism)
		}
		gd, wd := eventsJSON(t, got.Delta), eventsJSON(t, want.Delta)
		if !bytes.Equal(gd, wd) {
			t.Fatalf("turn %d: live and replayed deltas differ\nlive:   %s\nreplay: %s", turn, gd, wd)
		}
		if got.Result != want.Result || !bytes.Equal(got.Output, want.Output) {
			t.Fatalf("turn %d: results differ: live %v %s, replay %v %s", turn, got.Result, got.Output, want.Result, want.Output)
		}
		for i, ev := range got.Delta {
			if err := ev.Validate(); err != nil {
				t.Fatalf("turn %d: invalid event %d: %v", turn, i, err)
			}
			if want := int64(len(stored) + i + 1); ev.EventID != want {
				t.Fatalf("turn %d: event ID %d, want %d", turn, ev.EventID, want)
			}
		}
		stored = append(stored, got.Delta...)
		if got.Result != Running {
			if last := stored[len(stored)-1]; !last.Kind.IsTerminal() {
				t.Fatalf("turn %d: result %v but the last event is %s", turn, got.Result, last.Kind)
			}
			break
		}
		w.observe(got.Delta, id)
	}
	if err := Verify(cfg, stored); err != nil {
		t.Fatalf("Verify rejects the history the engine wrote: %v\n%s", err, eventsJSON(t, stored))
	}
}

func FuzzReplay(f *testing.F) {
	f.Add([]byte{0, 1, 4, 5}, []byte{1, 2, 3})
	f.Add([]byte{0, 2, 3, 6, 6, 6}, []byte{3, 0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{9, 9, 10, 7, 8, 4, 4, 4}, []byte{2, 9, 9, 9, 0, 0, 0})
	f.Add([]byte{3, 3, 15, 6, 6}, []byte{4, 4, 2, 2, 2})
	f.Add([]byte{0, 0, 0, 0, 6, 6, 6, 6, 11}, []byte{1, 1, 1, 1, 1, 1})
	f.Add([]byte{10, 10, 6, 23, 6}, []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{193, 0, 2, 6, 195, 194, 4, 4}, []byte{1, 3, 0, 2, 1, 0, 3})
	f.Add([]byte{197, 201, 3, 192, 6, 198, 4, 4, 4}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 0, 0})
	f.Add([]byte{9, 195, 193, 2, 192, 6, 6, 6}, []byte{3, 3, 3, 1, 1, 1})
	f.Add([]byte{0, 2, 3, 10, 6, 4, 4, 0, 0, 4, 4, 4}, []byte{1, 3, 0, 1, 3, 1, 0, 3, 2, 2})
	f.Add([]byte{0, 1, 193, 2, 6, 4, 0, 4}, []byte{0, 3, 0, 3, 0, 3, 1, 1, 1})
	f.Fuzz(func(t *testing.T, prog, choices []byte) {
		if len(prog) > 64 {
			prog = prog[:64]
		}
		runProgram(t, prog, choices)
	})
}
