package duroxide_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
)

// The end-to-end cases of cancellation seen by the code, its grace period
// and the instance timeout run on every store in provider/providertest
// (TestEndToEnd/.../CancelGrace*, InstanceTimeout, CancelCascadeCleansUpChild).

func TestInstanceTimeoutNegativeIsInvalid(t *testing.T) {
	t.Parallel()
	h := duroxidetest.New(t, duroxide.NewRegistry(), nil)
	err := h.Client.StartOrchestration(context.Background(), "x", "X", nil, &duroxide.StartOptions{Timeout: -time.Second})
	if !errors.Is(err, duroxide.ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
}
