package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/duroxide/duroxide-go/provider"
)

// ListValues reads the values of instanceID in key order; see
// provider.Admin.ListValues.
func ListValues(ctx context.Context, q Querier, instanceID string) ([]provider.Value, error) {
	out := []provider.Value{}
	var exists bool
	err := q.Batch(ctx, []Stmt{
		{Query: QInstanceExists, Args: []any{instanceID}, Scan: func(r Row) error { return r.Scan(&exists) }},
		{Query: QValues, Args: []any{instanceID}, Scan: func(r Row) error {
			var v provider.Value
			var raw string
			var at int64
			if err := r.Scan(&v.Key, &raw, &at); err != nil {
				return err
			}
			v.Value, v.UpdatedAt = json.RawMessage(raw), MsTime(at)
			out = append(out, v)
			return nil
		}},
	})
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	}
	return out, nil
}

// GetValue reads one value of instanceID; see provider.Admin.GetValue.
func GetValue(ctx context.Context, q Querier, instanceID, key string) (*provider.Value, error) {
	var exists, found bool
	v := &provider.Value{Key: key}
	err := q.Batch(ctx, []Stmt{
		{Query: QInstanceExists, Args: []any{instanceID}, Scan: func(r Row) error { return r.Scan(&exists) }},
		{Query: QValue, Args: []any{instanceID, key}, Scan: func(r Row) error {
			var raw string
			var at int64
			if err := r.Scan(&raw, &at); err != nil {
				return err
			}
			found, v.Value, v.UpdatedAt = true, json.RawMessage(raw), MsTime(at)
			return nil
		}},
	})
	switch {
	case err != nil:
		return nil, err
	case !exists:
		return nil, fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	case !found:
		return nil, fmt.Errorf("instance %q has no value %q: %w", instanceID, key, provider.ErrNotFound)
	}
	return v, nil
}
