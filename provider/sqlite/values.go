package sqlite

import (
	"context"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
)

// ListValues returns an instance's values; see provider.Admin.
func (p *Provider) ListValues(ctx context.Context, instanceID string) ([]provider.Value, error) {
	const op = "listing values"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var out []provider.Value
	err := p.read(ctx, op, func() (err error) {
		out, err = sqlstore.ListValues(ctx, p.readQuerier(nil), instanceID)
		return err
	})
	return out, err
}

// GetValue returns one value of an instance; see provider.Admin.
func (p *Provider) GetValue(ctx context.Context, instanceID, key string) (*provider.Value, error) {
	const op = "getting value"
	if err := sqlstore.CheckInstanceID(instanceID); err != nil {
		return nil, p.fail(op, err)
	}
	var v *provider.Value
	err := p.read(ctx, op, func() (err error) {
		v, err = sqlstore.GetValue(ctx, p.readQuerier(nil), instanceID, key)
		return err
	})
	return v, err
}
