// Package providertest is the conformance suite every duroxide-go store must
// pass. A provider's tests call Run with a Harness that builds fresh, empty
// stores; everything else (the cases, their helpers, the clock) lives here,
// so every behaviour is tested the same way on every store. They also call
// RunEndToEnd, which runs real orchestrations through the runtime on the
// store, every scenario once with the instance cache and once without.
//
// Time is never waited for: each store is built around the Clock the suite
// passes in, and cases that need a lock to expire or a timer to come due
// advance that clock.
//
// Cases of the optional capabilities provider.Waker, provider.Exporter and
// provider.Importer skip, saying so, on a store that does not implement them.
package providertest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// Harness tells the suite how to build and damage a store.
type Harness struct {
	// New returns a fresh, empty provider that reads the time only from
	// clock.Now. The harness closes it when the test ends (t.Cleanup).
	New func(t testing.TB, clock *Clock) provider.Provider
	// EnqueueWork inserts worker-queue messages atomically, all or none,
	// without a turn ack (the runtime enqueues activities only through
	// acks): the worker-queue cases set up their rows with it.
	EnqueueWork func(ctx context.Context, p provider.Provider, msgs ...*provider.WorkerMessage) error
	// NewSharing, when set, opens a second store on the database of p, as
	// another process would, reading the same clock; it returns nil when p
	// cannot be shared (an in-memory database). The suite closes it.
	NewSharing func(t testing.TB, p provider.Provider, clock *Clock) provider.Provider
	// CorruptHistory overwrites every stored event of the instance's current
	// execution with data that cannot be decoded.
	CorruptHistory func(t testing.TB, p provider.Provider, instanceID string)
	// CorruptOrchestratorMessages overwrites the payload of every
	// orchestrator-queue message of the instance with data that cannot be decoded.
	CorruptOrchestratorMessages func(t testing.TB, p provider.Provider, instanceID string)
	// CorruptWorkItems overwrites the payload of every worker-queue row of the
	// instance with data that cannot be decoded.
	CorruptWorkItems func(t testing.TB, p provider.Provider, instanceID string)
	// FreshDatabase returns a function that opens a store, reading clock,
	// on one fresh database that no store has opened (nor migrated) yet;
	// each call opens another store on that same database, as processes
	// starting at the same moment would. The suite calls it concurrently
	// and closes what it returns. It returns nil when the store has no
	// database to share (an in-memory one).
	FreshDatabase func(t testing.TB, clock *Clock) func() (provider.Provider, error)
}

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// suiteStart is the clock's initial time: fixed, so failures reproduce.
var suiteStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testCase is one conformance case.
type testCase struct {
	name string
	run  func(e *env)
}

type group struct {
	name  string
	cases []testCase
}

// groups lists the suite's groups; Run starts them in this order.
func groups() []group {
	return []group{
		{"Atomicity", atomicityCases},
		{"Errors", errorCases},
		{"InstanceCreation", creationCases},
		{"InstanceLocking", lockingCases},
		{"LockExpiry", expiryCases},
		{"MultiExecution", executionCases},
		{"Queues", queueCases},
		{"Management", adminCases},
		{"Poison", poisonCases},
		{"Cancellation", cancellationCases},
		{"Deletion", deletionCases},
		{"Sessions", sessionCases},
		{"BadInput", badInputCases},
		{"Wakeups", wakeupCases},
		{"LastError", lastErrorCases},
		{"ExecutionLocks", execLockCases},
		{"Idempotency", idempotencyCases},
		{"CachedHistory", cachedCases},
		{"PendingStarts", pendingStartCases},
		{"Notifications", notifyCases},
		{"Leases", leaseCases},
		{"TakeTurn", takeTurnCases},
		{"LeaseExpiry", leaseExpiryCases},
		{"LostLeasePoison", lostLeasePoisonCases},
		{"ChildFanIn", fanInCases},
		{"ConcurrentMigration", concurrentMigrationCases},
		{"Copy", copyCases},
		{"Waits", waitCases},
		{"Pause", pauseCases},
		{"Schedules", scheduleCases},
		{"Then", thenCases},
		{"StartIfAbsent", startIfAbsentCases},
		{"Values", valueCases},
		{"Hammer", hammerCases},
		{"Maintenance", maintenanceCases},
		{"Routing", routingCases},
		{"OrchestrationRouting", orchRoutingCases},
		{"OrchestrationVersionRouting", orchVersionRoutingCases},
		{"OrchestrationRoutes", orchRouteCases},
		{"FetchAhead", aheadCases},
	}
}

// CaseCount returns the number of cases Run executes.
func CaseCount() int {
	n := 0
	for _, g := range groups() {
		n += len(g.cases)
	}
	return n
}

// Run runs the whole conformance suite against the stores h builds.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("providertest: Harness.New is nil")
	}
	for _, g := range groups() {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(newEnv(t, h))
				})
			}
		})
	}
}
