// Command saga shows a saga: a trip is booked in three steps (flight,
// hotel, car), each an activity against another system. When a step fails,
// the steps already done are undone by compensating activities, in reverse
// order, so no booking is left dangling. Compensations are retried with
// durable backoff: a rollback must finish even if a system is briefly down.
//
//	go run ./examples/saga             # the car is sold out: rolled back
//	go run ./examples/saga -car Compact
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func main() {
	db := flag.String("db", "", "SQLite database file (default: in memory)")
	car := flag.String("car", "SUV", "car to rent (SUVs are sold out)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *db, *car); err != nil {
		fmt.Fprintln(os.Stderr, "saga:", err)
		os.Exit(1)
	}
}

// Trip is the input of the BookTrip orchestration.
type Trip struct {
	Flight, Hotel, Car string
}

// Agency stands in for the booking systems the activities call.
type Agency struct {
	mu       sync.Mutex
	soldOut  map[string]bool
	next     int
	bookings map[string]string // reference -> what it books
	log      []string
}

// NewAgency returns an agency where the items named in soldOut cannot be booked.
func NewAgency(soldOut ...string) *Agency {
	a := &Agency{soldOut: map[string]bool{}, bookings: map[string]string{}}
	for _, s := range soldOut {
		a.soldOut[s] = true
	}
	return a
}

// Book books item and returns its reference.
func (a *Agency) Book(kind, item string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.soldOut[item] {
		a.log = append(a.log, "book "+kind+" "+item+": sold out")
		return "", fmt.Errorf("%s %s is sold out", kind, item)
	}
	a.next++
	ref := fmt.Sprintf("%c-%d", kind[0], a.next)
	a.bookings[ref] = kind + " " + item
	a.log = append(a.log, "book "+kind+" "+item+": "+ref)
	return ref, nil
}

// Cancel cancels a booking; canceling twice is harmless, as compensations
// may run more than once.
func (a *Agency) Cancel(ref string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.bookings, ref)
	a.log = append(a.log, "cancel "+ref)
	return nil
}

// Log returns what the agency was asked to do, in order.
func (a *Agency) Log() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.log...)
}

// Bookings returns the number of bookings held.
func (a *Agency) Bookings() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.bookings)
}

// register adds the example's orchestration and its activities, backed by
// agency, to reg.
func register(reg *duroxide.Registry, agency *Agency) {
	for _, kind := range []string{"flight", "hotel", "car"} {
		duroxide.RegisterActivity(reg, "Book_"+kind, func(_ context.Context, item string) (string, error) {
			return agency.Book(kind, item)
		})
		duroxide.RegisterActivity(reg, "Cancel_"+kind, func(_ context.Context, ref string) (struct{}, error) {
			return struct{}{}, agency.Cancel(ref)
		})
	}
	duroxide.RegisterOrchestration(reg, "BookTrip", bookTrip)
}

// bookTrip books each step of the trip and returns the references; on a
// failure it cancels the steps already booked, latest first, and fails.
func bookTrip(ctx *duroxide.OrchestrationContext, trip Trip) ([]string, error) {
	steps := []struct{ kind, item string }{{"flight", trip.Flight}, {"hotel", trip.Hotel}, {"car", trip.Car}}
	type booked struct{ kind, ref string }
	var done []booked
	for _, s := range steps {
		var ref string
		err := ctx.ScheduleActivity("Book_"+s.kind, s.item).Await(&ref)
		if err == nil {
			done = append(done, booked{s.kind, ref})
			continue
		}
		// Compensate in reverse order. Retry each cancellation with durable
		// backoff; the saga does not end until the rollback is complete.
		retry := duroxide.RetryPolicy{MaxAttempts: 10, InitialInterval: time.Second, MaxInterval: time.Minute}
		for i := len(done) - 1; i >= 0; i-- {
			if cerr := ctx.ScheduleActivityWithRetry("Cancel_"+done[i].kind, done[i].ref, retry).Await(nil); cerr != nil {
				return nil, fmt.Errorf("booking the %s failed (%w), and canceling %s failed too: %w", s.kind, err, done[i].ref, cerr)
			}
		}
		return nil, fmt.Errorf("booking the %s failed, trip rolled back: %w", s.kind, err)
	}
	refs := make([]string, len(done))
	for i, b := range done {
		refs[i] = b.ref
	}
	return refs, nil
}

func run(ctx context.Context, stdout io.Writer, dbPath, car string) error {
	store, err := sqlite.Open(ctx, dbPath, nil)
	if err != nil {
		return err
	}
	defer store.Close()

	agency := NewAgency("SUV")
	reg := duroxide.NewRegistry()
	register(reg, agency)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		return err
	}
	defer rt.Shutdown(context.Background())

	client := duroxide.NewClient(store)
	id := "trip-" + car
	trip := Trip{Flight: "LH400", Hotel: "Plaza", Car: car}
	err = client.StartOrchestration(ctx, id, "BookTrip", trip, nil)
	if err != nil && !errors.Is(err, duroxide.ErrInstanceExists) {
		return err
	}
	st, err := client.WaitForOrchestration(ctx, id)
	if err != nil {
		return err
	}
	for _, line := range agency.Log() {
		fmt.Fprintln(stdout, "agency:", line)
	}
	var refs []string
	if err := st.Decode(&refs); err != nil {
		var oe *duroxide.OrchestrationError
		if !errors.As(err, &oe) {
			return err
		}
		fmt.Fprintf(stdout, "%s %s: %s\n", id, st.State, oe.Info.Message)
	} else {
		fmt.Fprintf(stdout, "%s %s: booked %s\n", id, st.State, strings.Join(refs, ", "))
	}
	fmt.Fprintf(stdout, "bookings held: %d\n", agency.Bookings())
	return nil
}
