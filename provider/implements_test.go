package provider_test

import (
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/postgres"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// sqlStore is everything the SQL stores implement: the contract and
// every optional store interface the runtime, client, CLI and dashboard
// look for. Both stores must implement all of it; this fails to compile
// when one does not.
type sqlStore interface {
	provider.Provider
	provider.Waker
	provider.Migrator
	provider.WritableChecker
	provider.StatsReporter
	provider.Exporter
	provider.Importer
	provider.Heartbeater
	provider.Router
	provider.Leaser
	provider.ExecutionPruner
	provider.BulkJobStore
	provider.Pauser
	provider.Rewinder
	provider.ScheduleStore
}

var (
	_ sqlStore = (*sqlite.Provider)(nil)
	_ sqlStore = (*postgres.Provider)(nil)
)
