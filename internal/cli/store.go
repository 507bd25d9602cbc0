package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

// store is what the commands need of a store.
type store = storeurl.Store

// resolveStore resolves --db, then $DUROXIDE_DB, then the default.
func (inv *invocation) resolveStore() (storeurl.Spec, error) {
	return storeurl.Resolve(inv.db, inv.getenv)
}

// logger is the logger of the store and the runtime: warnings and errors on
// standard error.
func (inv *invocation) logger() *slog.Logger {
	h := slog.Handler(slog.NewTextHandler(inv.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if inv.onMigration != nil {
		h = &migrationRecorder{Handler: h, record: inv.onMigration}
	}
	return slog.New(h)
}

// openStore opens the store named by --db.
func (inv *invocation) openStore(ctx context.Context, mode storeurl.Mode) (store, storeurl.Spec, error) {
	spec, err := inv.resolveStore()
	if err != nil {
		return nil, spec, err
	}
	s, err := inv.openSpec(ctx, spec, mode)
	return s, spec, err
}

// openSpec opens the store spec names.
func (inv *invocation) openSpec(ctx context.Context, spec storeurl.Spec, mode storeurl.Mode) (store, error) {
	return storeurl.Open(ctx, spec, mode, inv.logger())
}

// openClient opens the store and returns a client of it and a function
// that closes the store.
func (inv *invocation) openClient(ctx context.Context, mode storeurl.Mode) (*duroxide.Client, func(), error) {
	p, _, err := inv.openStore(ctx, mode)
	if err != nil {
		return nil, nil, err
	}
	return duroxide.NewClient(p), func() {
		if err := p.Close(); err != nil {
			fmt.Fprintf(inv.stderr, "duroxide: closing store: %v\n", err)
		}
	}, nil
}
