package sqlstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/duroxide/duroxide-go/provider"
)

// StoreError is a driver error translated to a provider sentinel. Both
// stay reachable with errors.Is/As.
type StoreError struct {
	Sentinel error
	Cause    error
}

func (e *StoreError) Error() string   { return fmt.Sprintf("%v: %v", e.Sentinel, e.Cause) }
func (e *StoreError) Unwrap() []error { return []error{e.Sentinel, e.Cause} }

// Translated returns the translation of a driver error: cause wrapped
// with sentinel.
func Translated(sentinel, cause error) error { return &StoreError{Sentinel: sentinel, Cause: cause} }

// sentinels are the provider errors that need no translation.
var sentinels = []error{
	provider.ErrNotFound, provider.ErrInstanceExists, provider.ErrLockLost, provider.ErrDuplicateEvent,
	provider.ErrCorruptData, provider.ErrStillRunning, provider.ErrChildInstance, provider.ErrInvalidArgument,
	provider.ErrClosed, provider.ErrBusy, provider.ErrUnavailable, provider.ErrLocked, provider.ErrLockContended,
}

// Classified reports whether err needs no translation by a store's
// interpretError: nil, an error already translated, one that carries a
// provider sentinel, and a context error pass through unchanged.
func Classified(err error) bool {
	if err == nil {
		return true
	}
	var se *StoreError
	if errors.As(err, &se) {
		return true
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
