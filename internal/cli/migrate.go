package cli

import (
	"context"
	"fmt"
)

var migrateCommand = &command{
	name:     "migrate",
	synopsis: "[--db DB]",
	summary:  "create the store or bring its schema up to date",
	details: `Applies pending schema migrations; running it again does nothing. Other
commands migrate on open too, so 'migrate' is for creating a store ahead of
time or upgrading it as a separate deployment step. It is safe while other
processes use the store.

On PostgreSQL (--db postgres://USER:PASSWORD@HOST/DB?schema=NAME) it creates
the schema if it is missing (default schema: duroxide) and applies the
migrations under an advisory lock, so nodes starting together migrate once.
Run it before deploying a release whose schema is newer, so that nodes need
not migrate as they start.`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		if err := inv.parse(args, 0); err != nil {
			return err
		}
		p, spec, err := inv.openStore(ctx, openNoMigrate)
		if err != nil {
			return err
		}
		defer p.Close()
		if err := p.Migrate(ctx); err != nil {
			return spec.wrapErr(err, "migrating %s", spec.display)
		}
		_, err = fmt.Fprintf(inv.stdout, "store %s is up to date\n", spec.display)
		return err
	},
}
