package provider

import "context"

// The optional capabilities below are not part of Provider: the runtime
// needs none of them, and a store that has one says so by implementing
// its interface (callers test with a type assertion). Both SQL stores
// implement all three, and ScheduleStore (schedules.go).

// Migrator is a store with a schema that can be brought up to date.
type Migrator interface {
	// Migrate applies the pending schema migrations. It is safe to run
	// from several processes at once, and fails, changing nothing, on a
	// schema migrated by a newer release.
	Migrate(ctx context.Context) error
}

// WritableChecker is a store that can prove it is ready to serve.
type WritableChecker interface {
	// CheckWritable reports whether the store answers, is migrated and
	// accepts writes; it writes nothing that lasts.
	CheckWritable(ctx context.Context) error
}

// Stats are counters of a store since it was opened.
type Stats struct {
	// Commits counts the write transactions committed (reads, failed
	// transactions and migrations are not counted). A store that groups
	// concurrent calls into one commit counts that commit once.
	Commits int64
	// ListenerReconnects counts how often a store that listens for other
	// processes' notifications on a connection (PostgreSQL) re-established
	// it after it broke; 0 for a store without one.
	ListenerReconnects int64
}

// StatsReporter is a store that counts its work.
type StatsReporter interface {
	// Stats returns the store's counters. It is safe to call concurrently
	// with any other method, also after Close.
	Stats() Stats
}
