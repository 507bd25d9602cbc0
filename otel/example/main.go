// Command example runs a two-step orchestration on an in-memory store with
// OpenTelemetry tracing and prints the spans on standard output: the
// caller's span, one span per orchestration turn and one per activity, in
// one trace.
//
//	cd otel && go run ./example
package main

import (
	"context"
	"log"

	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/duroxide/duroxide-go"
	duroxideotel "github.com/duroxide/duroxide-go/otel"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

func main() {
	ctx := context.Background()
	exp, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(ctx) }()

	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Checkout", func(ctx *duroxide.OrchestrationContext, order string) (string, error) {
		if err := ctx.ScheduleActivity("Reserve", order).Await(nil); err != nil {
			return "", err
		}
		var receipt string
		err := ctx.ScheduleActivity("Charge", order).Await(&receipt)
		return receipt, err
	})
	duroxide.RegisterActivity(reg, "Reserve", func(ctx context.Context, order string) (string, error) { return order, nil })
	duroxide.RegisterActivity(reg, "Charge", func(ctx context.Context, order string) (string, error) {
		return "receipt for " + order, nil
	})

	store, err := sqlite.Open(ctx, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	rt, err := duroxide.StartRuntime(ctx, store, reg, &duroxide.RuntimeOptions{
		Tracer: duroxideotel.NewTracer(&duroxideotel.Options{TracerProvider: tp})})
	if err != nil {
		log.Fatal(err)
	}
	client := duroxide.NewClient(store)

	sctx, span := tp.Tracer("example").Start(ctx, "place order")
	err = client.StartOrchestration(sctx, "order-42", "Checkout", "order-42",
		&duroxide.StartOptions{TraceParent: duroxideotel.TraceParent(sctx)})
	span.End()
	if err != nil {
		log.Fatal(err)
	}
	if _, err := client.WaitForOrchestration(ctx, "order-42"); err != nil {
		log.Fatal(err)
	}
	if err := rt.Shutdown(ctx); err != nil { // ends the last turn's span
		log.Fatal(err)
	}
}
