package providertest

import (
	"runtime"
	"sync"

	"github.com/duroxide/duroxide-go/provider"
)

// retry calls f until it returns a non-retryable result (at most 1000
// tries): under contention a store may answer with a retryable error
// (ErrBusy), which the contract allows and callers retry.
func retry[T any](f func() (T, error)) (T, error) {
	var v T
	var err error
	for range 1000 {
		if v, err = f(); !provider.IsRetryable(err) {
			return v, err
		}
		runtime.Gosched()
	}
	return v, err
}

// retryErr is retry for calls that return only an error.
func retryErr(f func() error) error {
	_, err := retry(func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// errOf is the error of a call that also returns Enqueue's results.
func errOf(_ []provider.EnqueueResult, err error) error { return err }

// parallel runs f(0), ..., f(n-1) on n goroutines released at the same
// moment, and waits for all of them.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}

// goErrors collects errors from goroutines; the case reports them afterwards.
type goErrors struct {
	mu   sync.Mutex
	errs []error
}

func (c *goErrors) add(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.errs = append(c.errs, err)
}

// check fails the case if any goroutine reported an error.
func (c *goErrors) check(e *env) {
	e.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.errs) > 0 {
		e.t.Fatalf("%d goroutine errors, first: %v", len(c.errs), c.errs[0])
	}
}
