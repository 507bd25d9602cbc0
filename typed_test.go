package duroxide_test

import (
	"context"
	"errors"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

type quote struct {
	Item  string `json:"item"`
	Cents int    `json:"cents"`
}

func TestTypedReferencesAndClientHelpers(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	price := duroxide.RegisterActivity(reg, "Price", func(_ context.Context, item string) (quote, error) {
		if item == "" {
			return quote{}, duroxide.NonRetryable(errors.New("no item"))
		}
		return quote{Item: item, Cents: 100 * len(item)}, nil
	})
	v1 := duroxide.RegisterOrchestrationVersion(reg, "Quote", "1.0.0", func(ctx *duroxide.OrchestrationContext, item string) (quote, error) {
		return duroxide.CallActivity(ctx, price, item, nil).Get()
	})
	duroxide.RegisterOrchestrationVersion(reg, "Quote", "2.0.0", func(ctx *duroxide.OrchestrationContext, item string) (quote, error) {
		q, err := duroxide.CallActivity(ctx, price, item, nil).Get()
		q.Cents *= 2
		return q, err
	})
	parent := duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, item string) ([]quote, error) {
		a := duroxide.CallSubOrchestration(ctx, v1, "", item, nil)                 // pinned to 1.0.0
		b := duroxide.CallSubOrchestration(ctx, v1.WithVersion(""), "", item, nil) // latest
		c := duroxide.CallSubOrchestration(ctx, v1, "", item, &duroxide.SubOrchestrationOptions{Version: "2.0.0"})
		var out []quote
		for _, f := range []*duroxide.Future[quote]{a, b, c} {
			q, err := f.Get()
			if err != nil {
				return nil, err
			}
			out = append(out, q)
		}
		return out, nil
	})
	h := duroxidetest.New(t, reg, nil)
	ctx := context.Background()

	// A pinned reference starts its version; an unpinned one the latest.
	if err := duroxide.StartTyped(ctx, h.Client, v1, "q1", "tea", nil); err != nil {
		t.Fatal(err)
	}
	q, err := duroxide.WaitTyped(ctx, h.Client, v1, "q1")
	if err != nil || q != (quote{Item: "tea", Cents: 300}) {
		t.Fatalf("pinned: %+v, %v", q, err)
	}
	q, err = duroxide.RunTyped(ctx, h.Client, duroxide.NewOrchestrationRef[string, quote]("Quote"), "q2", "tea", nil)
	if err != nil || q.Cents != 600 {
		t.Fatalf("latest: %+v, %v", q, err)
	}

	qs, err := duroxide.RunTyped(ctx, h.Client, parent, "p1", "cake", nil)
	if err != nil || len(qs) != 3 || qs[0].Cents != 400 || qs[1].Cents != 800 || qs[2].Cents != 800 {
		t.Fatalf("children: %+v, %v", qs, err)
	}
	var versions []string
	for _, ev := range h.History("p1") {
		if ev.Kind == history.SubOrchestrationScheduled {
			versions = append(versions, ev.Version)
		}
	}
	if len(versions) != 3 || versions[0] != "1.0.0" || versions[1] != "" || versions[2] != "2.0.0" {
		t.Fatalf("children scheduled with versions %q", versions)
	}

	// A failed instance is an *OrchestrationError; a mismatched reference
	// is refused instead of misdecoded.
	_, err = duroxide.RunTyped(ctx, h.Client, v1, "q3", "", nil)
	var oe *duroxide.OrchestrationError
	if !errors.As(err, &oe) || oe.State != duroxide.StateFailed {
		t.Fatalf("failed instance: %v", err)
	}
	if _, err := duroxide.WaitTyped(ctx, h.Client, parent, "q1"); !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Fatalf("mismatched reference: %v", err)
	}
}
