package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/duroxide/duroxide-go/internal/logkey"
	"github.com/duroxide/duroxide-go/internal/storeurl"
)

var migrateCommand = &command{
	name:     "migrate",
	synopsis: "[--db DB]",
	summary:  "create the store or bring its schema up to date",
	details: `Applies pending schema migrations and prints the ones it applied; running
it again applies nothing. Other commands migrate on open too, so 'migrate'
is for creating a store ahead of time or upgrading it as a separate
deployment step. It is safe while other processes use the store.

On PostgreSQL (--db postgres://USER:PASSWORD@HOST/DB?schema=NAME) it creates
the schema if it is missing (default schema: duroxide) and applies the
migrations under an advisory lock, so nodes starting together migrate once.
Run it before deploying a release whose schema is newer, so that nodes need
not migrate as they start.`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		if err := inv.parse(args, 0); err != nil {
			return err
		}
		var applied []string
		inv.onMigration = func(name string) { applied = append(applied, name) }
		p, spec, err := inv.openStore(ctx, storeurl.NoMigrate)
		if err != nil {
			return err
		}
		defer p.Close()
		if err := p.Migrate(ctx); err != nil {
			return spec.WrapErr(err, "migrating %s", spec.Display)
		}
		switch len(applied) {
		case 0:
			_, err = fmt.Fprintf(inv.stdout, "store %s is up to date: no migration to apply\n", spec.Display)
		case 1:
			_, err = fmt.Fprintf(inv.stdout, "store %s: applied 1 migration (%s); it is up to date\n", spec.Display, applied[0])
		default:
			_, err = fmt.Fprintf(inv.stdout, "store %s: applied %d migrations (%s); it is up to date\n", spec.Display, len(applied), strings.Join(applied, ", "))
		}
		return err
	},
}

// migrationRecorder passes log records to Handler and tells record the
// migration named by each record that has one: both stores log each
// migration they apply, with the logkey.Migration attribute, at Info.
type migrationRecorder struct {
	slog.Handler
	record func(name string)
}

func (m *migrationRecorder) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || m.Handler.Enabled(ctx, l)
}

func (m *migrationRecorder) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == logkey.Migration {
			m.record(a.Value.String())
			return false
		}
		return true
	})
	if !m.Handler.Enabled(ctx, r.Level) {
		return nil
	}
	return m.Handler.Handle(ctx, r)
}

func (m *migrationRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &migrationRecorder{Handler: m.Handler.WithAttrs(as), record: m.record}
}

func (m *migrationRecorder) WithGroup(name string) slog.Handler {
	return &migrationRecorder{Handler: m.Handler.WithGroup(name), record: m.record}
}
