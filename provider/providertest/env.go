package providertest

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go/provider"
)

// lockTimeout is the lock duration every case passes to fetches.
const lockTimeout = 30 * time.Second

// sessionLease is the session lease the session cases use: shorter than
// lockTimeout, so a lease can lapse while an activity lock is still held.
const sessionLease = 10 * time.Second

// testOrch and testVersion name the orchestration the cases pretend to run.
const (
	testOrch    = "TestOrch"
	testVersion = "1.0.0"
)

// env is what a case works with: one fresh store and its clock.
type env struct {
	t     *testing.T
	h     Harness
	ctx   context.Context
	clock *Clock
	p     provider.Provider
}

func newEnv(t *testing.T, h Harness) *env {
	clock := NewClock(suiteStart)
	p := h.New(t, clock)
	t.Cleanup(func() { _ = p.Close() })
	return &env{t: t, h: h, ctx: t.Context(), clock: clock, p: p}
}

// admin returns the store's Admin side.
func (e *env) admin() provider.Admin { return e.p }

// expireLocks advances the clock past every lock taken with lockTimeout.
func (e *env) expireLocks() { e.clock.Advance(lockTimeout + time.Millisecond) }
