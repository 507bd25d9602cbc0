// Command approval shows a human approval with a deadline: the
// orchestration waits for an external event (the approver's decision,
// raised through the client, the HTTP API or the CLI) and a durable timer
// at once, and takes whichever comes first. The wait is durable: a runtime
// restarted tomorrow still delivers the decision, or the timeout.
//
//	go run ./examples/approval -decision approve
//	go run ./examples/approval -decision none -timeout 2s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func main() {
	db := flag.String("db", "", "SQLite database file (default: in memory)")
	decision := flag.String("decision", "approve", "what the approver does: approve, reject or none")
	timeout := flag.Duration("timeout", 5*time.Second, "how long to wait for a decision")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, *db, *decision, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "approval:", err)
		os.Exit(1)
	}
}

// Request is the input of the Approval orchestration.
type Request struct {
	Item    string        `json:"item"`
	Amount  int           `json:"amount"`
	Timeout time.Duration `json:"timeout"`
}

// Decision is the data of the DecisionEvent.
type Decision struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// DecisionEvent is the external event the approver raises.
const DecisionEvent = "decision"

// register adds the example's orchestration to reg.
func register(reg *duroxide.Registry) {
	duroxide.RegisterOrchestration(reg, "Approval", func(ctx *duroxide.OrchestrationContext, req Request) (string, error) {
		decision := ctx.WaitForEvent(DecisionEvent)
		deadline := ctx.ScheduleTimer(req.Timeout)
		if ctx.Select(decision, deadline) == 1 {
			return fmt.Sprintf("%s: no decision within %v", req.Item, req.Timeout), nil
		}
		var d Decision
		if err := decision.Await(&d); err != nil {
			return "", err
		}
		if d.Approved {
			return fmt.Sprintf("%s: approved by %s", req.Item, d.By), nil
		}
		return fmt.Sprintf("%s: rejected by %s", req.Item, d.By), nil
	})
}

func run(ctx context.Context, stdout io.Writer, dbPath, decision string, timeout time.Duration) error {
	store, err := sqlite.Open(ctx, dbPath, nil)
	if err != nil {
		return err
	}
	defer store.Close()

	reg := duroxide.NewRegistry()
	register(reg)
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		return err
	}
	defer rt.Shutdown(context.Background())

	client := duroxide.NewClient(store)
	const id = "expense-42"
	req := Request{Item: "expense 42 (new laptop, 1200 EUR)", Amount: 1200, Timeout: timeout}
	err = client.StartOrchestration(ctx, id, "Approval", req, nil)
	if err != nil && !errors.Is(err, duroxide.ErrInstanceExists) {
		return err
	}

	// The approver answers. In a real system this comes later, from
	// elsewhere: a web handler, `duroxide raise expense-42 decision ...`.
	switch decision {
	case "approve", "reject":
		d := Decision{Approved: decision == "approve", By: "alice"}
		if err := client.RaiseEvent(ctx, id, DecisionEvent, d); err != nil {
			return err
		}
	case "none":
	default:
		return fmt.Errorf("-decision must be approve, reject or none, not %q", decision)
	}

	st, err := client.WaitForOrchestration(ctx, id)
	if err != nil {
		return err
	}
	var result string
	if err := st.Decode(&result); err != nil {
		return err
	}
	fmt.Fprintln(stdout, result)
	return nil
}
