// Command typedmodule is an orchestration written in the typed form, in a
// module of its own that imports duroxide like a user's program does. The
// duroxide module's tests build and run it; it uses no `any`.
package main

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// Order is the orchestration's input.
type Order struct {
	ID    string   `json:"id"`
	Items []string `json:"items"`
}

// Receipt is its output.
type Receipt struct {
	OrderID string   `json:"orderId"`
	Lines   []string `json:"lines"`
	Total   int      `json:"total"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	reg := duroxide.NewRegistry()
	price := duroxide.RegisterActivity(reg, "Price", func(_ context.Context, item string) (int, error) {
		return len(item) * 100, nil
	})
	label := duroxide.RegisterActivity(reg, "Label", func(_ context.Context, item string) (string, error) {
		return strings.ToUpper(item), nil
	})
	line := duroxide.RegisterOrchestration(reg, "Line", func(ctx *duroxide.OrchestrationContext, item string) (string, error) {
		p := duroxide.CallActivity(ctx, price, item, &duroxide.ActivityOptions{
			Retry:               &duroxide.RetryPolicy{MaxAttempts: 3},
			StartToCloseTimeout: time.Minute,
		})
		l := duroxide.CallActivity(ctx, label, item, nil)
		cents, err := p.Get()
		if err != nil {
			return "", err
		}
		name, err := l.Get()
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s=%d", name, cents), nil
	})
	checkout := duroxide.RegisterOrchestration(reg, "Checkout", func(ctx *duroxide.OrchestrationContext, o Order) (Receipt, error) {
		r := Receipt{OrderID: o.ID}
		var lines []*duroxide.Future[string]
		for _, it := range o.Items {
			lines = append(lines, duroxide.CallSubOrchestration(ctx, line, "", it, nil))
		}
		for i, f := range lines {
			s, err := f.Get()
			if err != nil {
				return Receipt{}, err
			}
			r.Lines = append(r.Lines, s)
			cents, err := duroxide.CallActivity(ctx, price, o.Items[i], nil).Get()
			if err != nil {
				return Receipt{}, err
			}
			r.Total += cents
		}
		return r, nil
	})

	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Shutdown(ctx)

	client := duroxide.NewClient(store)
	receipt, err := duroxide.RunTyped(ctx, client, checkout, "order-1", Order{ID: "order-1", Items: []string{"tea", "cake"}}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s total=%d\n", receipt.OrderID, strings.Join(receipt.Lines, ","), receipt.Total)
}
