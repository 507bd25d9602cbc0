package sqlite

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
)

const benchBatch = 16

func openBench(b *testing.B) *Provider {
	b.Helper()
	p, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), &Options{Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

func reportRate(b *testing.B, perOp float64, unit string) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	if perOp != 1 {
		b.ReportMetric(perOp*float64(b.N)/b.Elapsed().Seconds(), unit)
	}
}

var benchInput = json.RawMessage(`{"order":42,"customer":"Ada Lovelace","items":["a","b","c"]}`)

func benchStart(id string) *provider.OrchestratorMessage {
	return &provider.OrchestratorMessage{
		InstanceID: id,
		Item: history.WorkItem{Kind: history.WorkStartOrchestration, InstanceID: id, ExecutionID: 1,
			Name: "Bench", Version: "1.0.0", Input: benchInput},
		Create: &provider.NewInstance{OrchestrationName: "Bench", OrchestrationVersion: "1.0.0", Input: benchInput},
	}
}

func benchActivity(id string, act int64) *provider.WorkerMessage {
	return &provider.WorkerMessage{
		InstanceID: id, ExecutionID: 1, ActivityID: act,
		Item: history.WorkItem{Kind: history.WorkActivityExecute, InstanceID: id, ExecutionID: 1, ID: act,
			Name: "Charge", Input: benchInput},
	}
}

// benchTurn is a first turn: started, a custom status, one activity scheduled.
func benchTurn(it *provider.OrchestrationItem) *provider.TurnAck {
	now := time.Now().UnixMilli()
	id := it.InstanceID
	return &provider.TurnAck{
		LockToken: it.LockToken, ExecutionID: 1,
		History: []history.Event{
			{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: now, Name: "Bench", Version: "1.0.0", Input: benchInput},
			{EventID: 2, Kind: history.NowRecorded, TimestampMs: now, TimeMs: now},
			{EventID: 3, Kind: history.ActivityScheduled, TimestampMs: now, Name: "Charge", Input: benchInput},
		},
		Metadata: provider.ExecutionMetadata{
			OrchestrationName: "Bench", OrchestrationVersion: "1.0.0", Status: provider.StatusRunning, Input: benchInput,
		},
		WorkerItems: []*provider.WorkerMessage{benchActivity(id, 3)},
	}
}

func benchCompletion(l *provider.WorkItemLease) *provider.WorkAck {
	return &provider.WorkAck{
		LockToken: l.LockToken,
		Completion: &provider.OrchestratorMessage{
			InstanceID: l.InstanceID,
			Item: history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: l.InstanceID,
				ExecutionID: l.ExecutionID, ID: l.ActivityID, Output: json.RawMessage(`{"charged":true}`)},
		},
	}
}

var benchFetch = provider.FetchOptions{LockTimeout: time.Minute}
var benchWorkFetch = provider.WorkFetchOptions{LockTimeout: time.Minute}

// BenchmarkTurnFetchAck: enqueue a start, fetch the turn, ack it with three
// events and one activity (three transactions per op).
func BenchmarkTurnFetchAck(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := "turn-" + strconv.Itoa(i)
		if _, err := p.Enqueue(ctx, benchStart(id)); err != nil {
			b.Fatal(err)
		}
		it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
		if err != nil || it == nil {
			b.Fatalf("fetch: %v, %v", it, err)
		}
		if _, err := p.AckOrchestrationItem(ctx, benchTurn(it)); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, 1, "")
}

// BenchmarkTurnFetchAckBatch: enqueue 16 starts, fetch them with Max 16,
// ack the 16 turns concurrently (one group commit when they meet).
func BenchmarkTurnFetchAckBatch(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	opts := benchFetch
	opts.Max = benchBatch
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		msgs := make([]*provider.OrchestratorMessage, benchBatch)
		for j := range msgs {
			msgs[j] = benchStart("batch-" + strconv.Itoa(i) + "-" + strconv.Itoa(j))
		}
		if _, err := p.Enqueue(ctx, msgs...); err != nil {
			b.Fatal(err)
		}
		items, err := p.FetchOrchestrationItems(ctx, opts)
		if err != nil || len(items) != benchBatch {
			b.Fatalf("fetch: %d items, %v", len(items), err)
		}
		if err := concurrently(len(items), func(j int) error { _, err := p.AckOrchestrationItem(ctx, benchTurn(items[j])); return err }); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, benchBatch, "turns/s")
}

// concurrently runs f(0..n-1) on n goroutines and returns their errors joined.
func concurrently(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = f(i) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func fillWork(b *testing.B, p *Provider, n int) {
	b.Helper()
	const chunk = 500
	for i := 0; i < n; i += chunk {
		var msgs []*provider.WorkerMessage
		for j := i; j < min(n, i+chunk); j++ {
			msgs = append(msgs, benchActivity("act-"+strconv.Itoa(j/10), int64(j%10)+1))
		}
		if err := p.enqueueWork(context.Background(), msgs...); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkActivityFetchAck: fetch one activity, ack it with its completion.
func BenchmarkActivityFetchAck(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	fillWork(b, p, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l, err := provider.FetchWorkItem(ctx, p, benchWorkFetch)
		if err != nil || l == nil {
			b.Fatalf("fetch: %v, %v", l, err)
		}
		if _, err := p.AckWorkItem(ctx, benchCompletion(l)); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, 1, "")
}

// BenchmarkActivityFetchAckBatch: fetch 16 activities, ack them with their
// completions concurrently (one group commit when they meet).
func BenchmarkActivityFetchAckBatch(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	fillWork(b, p, b.N*benchBatch)
	opts := benchWorkFetch
	opts.Max = benchBatch
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		leases, err := p.FetchWorkItems(ctx, opts)
		if err != nil || len(leases) != benchBatch {
			b.Fatalf("fetch: %d leases, %v", len(leases), err)
		}
		if err := concurrently(len(leases), func(j int) error { _, err := p.AckWorkItem(ctx, benchCompletion(leases[j])); return err }); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, benchBatch, "activities/s")
}

// BenchmarkEnqueue: one external event per Enqueue call.
func BenchmarkEnqueue(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := "ev-" + strconv.Itoa(i%100)
		_, err := p.Enqueue(ctx, &provider.OrchestratorMessage{
			InstanceID: id,
			Item:       history.WorkItem{Kind: history.WorkExternalRaised, InstanceID: id, Name: "approval", Data: json.RawMessage(`true`)},
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, 1, "")
}

// BenchmarkParallelActivityFetchAck: 16 goroutines each fetch one activity
// and ack it with its completion, as independent worker slots do. Group
// commit lets their transactions share commits.
func BenchmarkParallelActivityFetchAck(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	fillWork(b, p, b.N+64)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := provider.FetchWorkItem(ctx, p, benchWorkFetch)
			if err != nil || l == nil {
				b.Errorf("fetch: %v, %v", l, err)
				return
			}
			if _, err := p.AckWorkItem(ctx, benchCompletion(l)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, 1, "")
}

// BenchmarkParallelTurnFetchAck: 16 goroutines each enqueue a start, fetch
// one turn and ack it.
func BenchmarkParallelTurnFetchAck(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := "pturn-" + strconv.FormatInt(n.Add(1), 10)
			if _, err := p.Enqueue(ctx, benchStart(id)); err != nil {
				b.Error(err)
				return
			}
			it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
			if err != nil || it == nil {
				b.Errorf("fetch: %v, %v", it, err)
				return
			}
			if _, err := p.AckOrchestrationItem(ctx, benchTurn(it)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b, 1, "")
}

// BenchmarkTurnFetchAckWithBacklog measures a turn (enqueue, fetch, ack)
// while messages wait for other instances: a fetch must skip them. With
// "locked", their instances are held by turns in progress (the worst case:
// every fetch passes over them); with "delayed", they are timers not yet due;
// with "ready", they are fetchable and older than the new turn (a burst of
// starts), so the benchmark works through them.
func BenchmarkTurnFetchAckWithBacklog(b *testing.B) {
	for _, kind := range []string{"locked", "delayed", "ready"} {
		for _, backlog := range []int{0, 1000, 10000} {
			b.Run(kind+"/"+strconv.Itoa(backlog), func(b *testing.B) {
				p := openBench(b)
				ctx := context.Background()
				const perInstance = 10
				var msgs []*provider.OrchestratorMessage
				for i := range backlog / perInstance {
					id := "busy-" + strconv.Itoa(i)
					for j := range perInstance {
						m := &provider.OrchestratorMessage{
							InstanceID: id,
							Item: history.WorkItem{Kind: history.WorkActivityCompleted, InstanceID: id,
								ExecutionID: 1, ID: int64(j + 1), Output: json.RawMessage(`1`)},
						}
						if kind == "delayed" {
							m.VisibleAt = time.Now().Add(time.Hour)
						}
						msgs = append(msgs, m)
					}
				}
				for len(msgs) > 0 {
					n := min(len(msgs), 500)
					if _, err := p.Enqueue(ctx, msgs[:n]...); err != nil {
						b.Fatal(err)
					}
					msgs = msgs[n:]
				}
				if kind == "locked" {
					// Lock every busy instance and keep the locks, then queue
					// late arrivals behind them.
					for {
						items, err := p.FetchOrchestrationItems(ctx, provider.FetchOptions{LockTimeout: time.Hour, Max: 100})
						if err != nil {
							b.Fatal(err)
						}
						if len(items) == 0 {
							break
						}
					}
					for i := range backlog / perInstance {
						id := "busy-" + strconv.Itoa(i)
						late := make([]*provider.OrchestratorMessage, perInstance)
						for j := range late {
							late[j] = &provider.OrchestratorMessage{InstanceID: id, Item: history.WorkItem{
								Kind: history.WorkActivityCompleted, InstanceID: id, ExecutionID: 1, ID: int64(100 + j), Output: json.RawMessage(`1`)}}
						}
						if _, err := p.Enqueue(ctx, late...); err != nil {
							b.Fatal(err)
						}
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if _, err := p.Enqueue(ctx, benchStart("free-"+strconv.Itoa(i))); err != nil {
						b.Fatal(err)
					}
					it, err := provider.FetchOrchestrationItem(ctx, p, provider.FetchOptions{LockTimeout: time.Minute})
					if err != nil || it == nil {
						b.Fatalf("fetch: %v, %v", it, err)
					}
					if _, err := p.AckOrchestrationItem(ctx, benchTurn(it)); err != nil {
						b.Fatal(err)
					}
				}
				reportRate(b, 1, "")
			})
		}
	}
}

// BenchmarkNextVisible measures the read an idle dispatcher makes before it
// sleeps (provider.Waker), on an empty store and behind a backlog of
// delayed messages (timers) and activities: an index lookup, so its cost
// should not grow with the backlog.
func BenchmarkNextVisible(b *testing.B) {
	for _, backlog := range []int{0, 10000} {
		for _, q := range []provider.Queue{provider.QueueOrchestrator, provider.QueueWorker} {
			b.Run(queueLabel(q)+"/"+strconv.Itoa(backlog), func(b *testing.B) {
				p := openBench(b)
				ctx := context.Background()
				later := time.Now().Add(time.Hour)
				for i := 0; i < backlog; i += 500 {
					var msgs []*provider.OrchestratorMessage
					var work []*provider.WorkerMessage
					for j := i; j < min(backlog, i+500); j++ {
						id := "timer-" + strconv.Itoa(j)
						at := later.Add(time.Duration(j) * time.Millisecond)
						msgs = append(msgs, &provider.OrchestratorMessage{InstanceID: id, VisibleAt: at,
							Item: history.WorkItem{Kind: history.WorkTimerFired, InstanceID: id, ExecutionID: 1, ID: 1, FireAtMs: at.UnixMilli()}})
						a := benchActivity(id, 1)
						a.VisibleAt = at
						work = append(work, a)
					}
					if _, err := p.Enqueue(ctx, msgs...); err != nil {
						b.Fatal(err)
					}
					if err := p.enqueueWork(ctx, work...); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					next, err := p.NextVisible(ctx, q)
					if err != nil {
						b.Fatal(err)
					}
					if (backlog == 0) != next.IsZero() {
						b.Fatalf("NextVisible = %v with a backlog of %d", next, backlog)
					}
				}
			})
		}
	}
}

func queueLabel(q provider.Queue) string {
	if q == provider.QueueWorker {
		return "worker"
	}
	return "orchestrator"
}

// BenchmarkTurnFetchAckByName measures a turn (enqueue, fetch, ack) with
// the fetch limited to the orchestration names a runtime registers
// (FetchOptions.Orchestrations), against the same fetch without names,
// and behind a backlog of ready starts of an orchestration the fetch does
// not serve (queued first: every fetch scans past them).
func BenchmarkTurnFetchAckByName(b *testing.B) {
	for _, c := range []struct {
		name     string
		names    []string
		unserved int
	}{
		{"any", nil, 0},
		{"named", []string{"Bench", "Other2"}, 0},
		{"named/unserved=100", []string{"Bench"}, 100},
		{"named/unserved=1000", []string{"Bench"}, 1000},
	} {
		b.Run(c.name, func(b *testing.B) {
			p := openBench(b)
			ctx := context.Background()
			var msgs []*provider.OrchestratorMessage
			for i := range c.unserved {
				m := benchStart("other-" + strconv.Itoa(i))
				m.Item.Name, m.Create.OrchestrationName = "Other", "Other"
				msgs = append(msgs, m)
			}
			for len(msgs) > 0 {
				n := min(len(msgs), 500)
				if _, err := p.Enqueue(ctx, msgs[:n]...); err != nil {
					b.Fatal(err)
				}
				msgs = msgs[n:]
			}
			opts := provider.FetchOptions{LockTimeout: time.Minute, Orchestrations: c.names}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := p.Enqueue(ctx, benchStart("named-"+strconv.Itoa(i))); err != nil {
					b.Fatal(err)
				}
				it, err := provider.FetchOrchestrationItem(ctx, p, opts)
				if err != nil || it == nil || it.Instance.OrchestrationName != "Bench" {
					b.Fatalf("fetch: %+v, %v", it, err)
				}
				if _, err := p.AckOrchestrationItem(ctx, benchTurn(it)); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, 1, "")
		})
	}
}

// fanOutWidth is the activities of one BenchmarkFanOut orchestration.
const fanOutWidth = 100

// BenchmarkFanOut: one orchestration of the bench fanout workload, at the
// store: its first turn schedules fanOutWidth activities, which are fetched
// benchBatch at a time and acked concurrently (one group commit when they
// meet), and one last turn consumes their fanOutWidth results and
// completes it.
func BenchmarkFanOut(b *testing.B) {
	p := openBench(b)
	ctx := context.Background()
	wopts := benchWorkFetch
	wopts.Max = benchBatch
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		id := "fan-" + strconv.Itoa(i)
		if _, err := p.Enqueue(ctx, benchStart(id)); err != nil {
			b.Fatal(err)
		}
		it, err := provider.FetchOrchestrationItem(ctx, p, benchFetch)
		if err != nil || it == nil {
			b.Fatalf("fetch: %v, %v", it, err)
		}
		now := time.Now().UnixMilli()
		ack := &provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			History: []history.Event{
				{EventID: 1, Kind: history.OrchestrationStarted, TimestampMs: now, Name: "Bench", Version: "1.0.0", Input: benchInput},
			},
			Metadata: provider.ExecutionMetadata{
				OrchestrationName: "Bench", OrchestrationVersion: "1.0.0", Status: provider.StatusRunning, Input: benchInput,
			},
		}
		for a := int64(2); a < 2+fanOutWidth; a++ {
			ack.History = append(ack.History, history.Event{EventID: a, Kind: history.ActivityScheduled, TimestampMs: now, Name: "Charge", Input: benchInput})
			ack.WorkerItems = append(ack.WorkerItems, benchActivity(id, a))
		}
		if _, err := p.AckOrchestrationItem(ctx, ack); err != nil {
			b.Fatal(err)
		}
		for done := 0; done < fanOutWidth; {
			leases, err := p.FetchWorkItems(ctx, wopts)
			if err != nil || len(leases) == 0 {
				b.Fatalf("fetch: %d leases, %v", len(leases), err)
			}
			if err := concurrently(len(leases), func(j int) error { _, err := p.AckWorkItem(ctx, benchCompletion(leases[j])); return err }); err != nil {
				b.Fatal(err)
			}
			done += len(leases)
		}
		it, err = provider.FetchOrchestrationItem(ctx, p, benchFetch)
		if err != nil || it == nil || len(it.Messages) != fanOutWidth {
			b.Fatalf("fetch: %v, %v", it, err)
		}
		next := int64(len(it.History)) + 1
		last := &provider.TurnAck{
			LockToken: it.LockToken, ExecutionID: 1,
			Metadata: provider.ExecutionMetadata{Status: provider.StatusCompleted, Output: json.RawMessage(`5050`)},
		}
		for _, m := range it.Messages {
			last.History = append(last.History, history.Event{EventID: next, Kind: history.ActivityCompleted, TimestampMs: now,
				SourceEventID: m.ID, Output: m.Output})
			next++
		}
		last.History = append(last.History, history.Event{EventID: next, Kind: history.OrchestrationCompleted, TimestampMs: now, Output: json.RawMessage(`5050`)})
		if _, err := p.AckOrchestrationItem(ctx, last); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, fanOutWidth, "activities/s")
}
