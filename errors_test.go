package duroxide_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/duroxidetest"
	"github.com/duroxide/duroxide-go/history"
)

// A taken child ID is recognized by its code; failures recorded by earlier
// releases, which wrote no code, by their exact kind and message.
func TestSubOrchestrationErrorInstanceExists(t *testing.T) {
	tests := []struct {
		name string
		err  duroxide.SubOrchestrationError
		want bool
	}{
		{"code", duroxide.SubOrchestrationError{Kind: "configuration", Message: "instance already exists", Code: "instance_exists"}, true},
		{"code with another message", duroxide.SubOrchestrationError{Kind: "configuration", Message: "child ID kid is taken", Code: "instance_exists"}, true},
		{"legacy: no code, exact message", duroxide.SubOrchestrationError{Kind: "configuration", Message: "instance already exists"}, true},
		{"legacy: no code, other message", duroxide.SubOrchestrationError{Kind: "configuration", Message: "instance already exists!"}, false},
		{"legacy message of another kind", duroxide.SubOrchestrationError{Kind: "application", Message: "instance already exists"}, false},
		{"legacy message with another code", duroxide.SubOrchestrationError{Kind: "configuration", Message: "instance already exists", Code: "other"}, false},
		{"unregistered child", duroxide.SubOrchestrationError{Kind: "configuration", Message: "orchestration Child is not registered on this runtime"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := error(&tt.err)
			if got := errors.Is(err, duroxide.ErrInstanceExists); got != tt.want {
				t.Fatalf("errors.Is(%+v, ErrInstanceExists) = %v, want %v", tt.err, got, tt.want)
			}
			if errors.Is(err, duroxide.ErrCanceled) {
				t.Fatalf("%+v matches ErrCanceled", tt.err)
			}
		})
	}
}

// A child ID collision is recorded with its code, which reaches the parent's
// SubOrchestrationError.
func TestChildIDCollisionIsRecordedWithItsCode(t *testing.T) {
	reg := duroxide.NewRegistry()
	duroxide.RegisterOrchestration(reg, "Child", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		return "child", nil
	})
	duroxide.RegisterOrchestration(reg, "Parent", func(ctx *duroxide.OrchestrationContext, _ any) (string, error) {
		err := ctx.ScheduleSubOrchestration("Child", "kid", nil).Await(nil)
		var se *duroxide.SubOrchestrationError
		if !errors.As(err, &se) {
			return "", fmt.Errorf("want *SubOrchestrationError, got %v", err)
		}
		return fmt.Sprintf("%s %s %v", se.Kind, se.Code, errors.Is(err, duroxide.ErrInstanceExists)), nil
	})
	h := duroxidetest.New(t, reg, nil)
	h.Start("Child", "kid", nil)
	h.Wait("kid")
	h.Start("Parent", "p", nil)
	var out string
	if err := h.Wait("p").Decode(&out); err != nil {
		t.Fatal(err)
	}
	if out != "configuration instance_exists true" {
		t.Fatalf("parent saw %q", out)
	}
	for _, ev := range h.History("p") {
		if ev.Kind == history.SubOrchestrationFailed {
			if ev.Error == nil || ev.Error.Code != history.CodeInstanceExists {
				t.Fatalf("recorded failure %+v, want code %s", ev.Error, history.CodeInstanceExists)
			}
			return
		}
	}
	t.Fatalf("no SubOrchestrationFailed in the parent's history")
}
