package history

import (
	"errors"
	"testing"
)

func TestNilValuesAreInvalid(t *testing.T) {
	t.Parallel()
	if _, err := EncodeEvent(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("EncodeEvent(nil) error = %v, want ErrInvalid", err)
	}
	if _, err := EncodeWorkItem(nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("EncodeWorkItem(nil) error = %v, want ErrInvalid", err)
	}
}
