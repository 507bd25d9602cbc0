package sqlstore

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/duroxide/duroxide-go/provider"
)

// Lock tokens are a random prefix (32 hex digits and a dot, fresh for each
// fetch) followed by the identity of what they lock: the instance ID for an
// instance lock, the row id for a worker row. A fetch builds all its tokens
// in one statement, and a token leads straight to its row by primary key,
// so no index on lock_token is needed. The tokens stay opaque to callers.
const tokenPrefixLen = 33

// NewTokenPrefix returns a fresh random lock-token prefix.
func NewTokenPrefix() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + "."
}

// TokenInstance returns the instance an orchestration lock token names.
func TokenInstance(token string) (string, bool) {
	if len(token) <= tokenPrefixLen || token[tokenPrefixLen-1] != '.' {
		return "", false
	}
	return token[tokenPrefixLen:], true
}

// TokenRow returns the worker row id a work lock token names.
func TokenRow(token string) (int64, bool) {
	if len(token) <= tokenPrefixLen || token[tokenPrefixLen-1] != '.' {
		return 0, false
	}
	id, err := strconv.ParseInt(token[tokenPrefixLen:], 10, 64)
	return id, err == nil
}

// Fail turns an error of operation op of the store named store into what
// the caller sees: ErrClosed once the store is closed, otherwise the error
// translated by interpret, with the store and the operation as context.
func Fail(store, op string, closed bool, err error, interpret func(err, conflict error) error) error {
	if err == nil {
		return nil
	}
	if closed && !errors.Is(err, provider.ErrClosed) {
		return fmt.Errorf("%s: %s: %w", store, op, provider.ErrClosed)
	}
	return fmt.Errorf("%s: %s: %w", store, op, interpret(err, nil))
}
