package duroxide_test

import (
	"context"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Greet", func(ctx *duroxide.OrchestrationContext, name string) (string, error) {
		var msg string
		if err := ctx.ScheduleActivity("Hello", name).Await(&msg); err != nil {
			return "", err
		}
		sum := 0
		var ts []*duroxide.Task
		for i := 0; i < 10; i++ {
			ts = append(ts, ctx.ScheduleActivity("Add", i))
		}
		for _, tk := range ts {
			var n int
			if err := tk.Await(&n); err != nil {
				return "", err
			}
			sum += n
		}
		if err := ctx.ScheduleTimer(10 * time.Millisecond).Await(nil); err != nil {
			return "", err
		}
		return msg + " " + string(rune('0'+sum%10)), nil
	})
	duroxide.RegisterActivity(reg, "Hello", func(ctx context.Context, name string) (string, error) {
		return "Hello, " + name + "!", nil
	})
	duroxide.RegisterActivity(reg, "Add", func(ctx context.Context, n int) (int, error) { return n + 1, nil })
	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Shutdown(ctx)
	c := duroxide.NewClient(store)
	if err := c.StartOrchestration(ctx, "g1", "Greet", "Ada", nil); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.WaitForOrchestration(wctx, "g1")
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := st.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out != "Hello, Ada! 5" {
		t.Fatalf("got %q", out)
	}
	h, _ := c.GetHistory(ctx, "g1", 0)
	for _, e := range h {
		t.Logf("%d %s %d", e.EventID, e.Kind, e.SourceEventID)
	}
}
