package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

func TestRun(t *testing.T) {
	t.Parallel()
	cases := []struct {
		car  string
		want string
	}{
		{"SUV", `agency: book flight LH400: f-1
agency: book hotel Plaza: h-2
agency: book car SUV: sold out
agency: cancel h-2
agency: cancel f-1
trip-SUV Failed: booking the car failed, trip rolled back: activity Book_car (#N) failed: car SUV is sold out
bookings held: 0
`},
		{"Compact", `agency: book flight LH400: f-1
agency: book hotel Plaza: h-2
agency: book car Compact: c-3
trip-Compact Completed: booked f-1, h-2, c-3
bookings held: 3
`},
	}
	for _, c := range cases {
		t.Run(c.car, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := run(ctx, &out, "", c.car); err != nil {
				t.Fatal(err)
			}
			// Activity IDs are history positions; they are not the point here.
			got := regexp.MustCompile(`\(#\d+\)`).ReplaceAllString(out.String(), "(#N)")
			if got != c.want {
				t.Fatalf("printed:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// TestCompensationsRetryInReverseOrder makes the first cancellation of each
// booking fail, so the compensations succeed only through their durable
// retries, on the fake clock.
func TestCompensationsRetryInReverseOrder(t *testing.T) {
	t.Parallel()
	agency := NewAgency("SUV")
	reg := duroxide.NewRegistry()
	var mu sync.Mutex
	down := map[string]bool{"h-2": true, "f-1": true} // each cancel fails once
	for _, kind := range []string{"flight", "hotel", "car"} {
		duroxide.RegisterActivity(reg, "Book_"+kind, func(_ context.Context, item string) (string, error) {
			return agency.Book(kind, item)
		})
		duroxide.RegisterActivity(reg, "Cancel_"+kind, func(_ context.Context, ref string) (struct{}, error) {
			mu.Lock()
			fail := down[ref]
			delete(down, ref)
			mu.Unlock()
			if fail {
				return struct{}{}, errors.New("booking system unavailable")
			}
			return struct{}{}, agency.Cancel(ref)
		})
	}
	duroxide.RegisterOrchestration(reg, "BookTrip", bookTrip)
	h := duroxidetest.New(t, reg, nil)

	h.Start("BookTrip", "trip", Trip{Flight: "LH400", Hotel: "Plaza", Car: "SUV"})
	st := h.AdvanceUntilDone("trip")
	if st.State != duroxide.StateFailed {
		t.Fatalf("state %s, want Failed", st.State)
	}
	want := []string{"book flight LH400: f-1", "book hotel Plaza: h-2", "book car SUV: sold out", "cancel h-2", "cancel f-1"}
	if got := agency.Log(); !slices.Equal(got, want) {
		t.Fatalf("agency saw %q, want %q", got, want)
	}
	if n := agency.Bookings(); n != 0 {
		t.Fatalf("%d bookings left after the rollback", n)
	}
	// Two retries, each after a durable 1s backoff.
	if got := h.Clock.Now().Sub(duroxidetest.DefaultStart); got != 2*time.Second {
		t.Fatalf("the rollback took %v of orchestration time, want 2s", got)
	}
}
