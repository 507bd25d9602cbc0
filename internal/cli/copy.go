package cli

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/duroxide/duroxide-go/internal/storeurl"
	"github.com/duroxide/duroxide-go/provider"
)

const copySynopsis = "--from DB --to DB [--force] [--batch N]"

var copyCommand = &command{
	name:     "copy",
	synopsis: copySynopsis,
	summary:  "copy a whole store into an empty one (e.g. SQLite to PostgreSQL)",
	details: `Copies everything one store holds into another, empty one, so a deployment
can move (typically from SQLite to PostgreSQL) without losing running work:
every instance, execution and history event, instance values, the messages
of both queues (timers and delayed starts included), pauses (a paused
instance stays paused, with who paused it and why), execution locks with
their queued starts, idempotency keys (those of purged instances too), dead
letters and schedules (paused or not, with their last and next fire, so the
target fires from where the source stopped). Bulk jobs are not copied: they
belong to the process that runs them; wait for them to finish first.
--from and --to take the same values as --db: sqlite:PATH, PATH.db or
postgres://USER:PASSWORD@HOST/DB?schema=NAME. The target is created and
migrated if needed, and must hold nothing: copy refuses a target with any
row in any of those tables.

Stop serving the source first: every 'duroxide serve' and every program
running a runtime on it. copy reads one consistent snapshot of the source;
work done on the source after that is not copied, and would be done twice
once runtimes start on the target. copy checks the snapshot for signs of a
runtime: an unexpired instance lock (a turn in progress; a pause is not
one), an unexpired
activity lease (an activity running) or an unexpired session lease, and
refuses if it finds any, saying how many. A runtime that stopped less than
its lock timeouts ago (by default 10s for turns, 30s for activities) leaves
such leases behind: wait for them to expire, or pass --force to copy anyway.
An idle runtime holds no lease, so the check cannot see it: stopping the
source's runtimes is up to you.

Leases are not copied: a message or activity that was locked in the source
is visible at once in the target (attempt counts are kept), so the target's
runtimes pick it up as after a crash. Execution locks are copied as they
are, with their expiry.

Rows are written in batches of --batch rows, one transaction each; a
progress line per table goes to standard error. At the end copy counts the
rows of each table in the target and compares them with the snapshot's
counts; a mismatch fails the command. If copy fails part-way the target is
partly written: empty it (remove the file, or drop the schema) before
running copy again.`,
	run: runCopy,
}

func runCopy(ctx context.Context, inv *invocation, args []string) error {
	inv.fs.Lookup("db").Usage = "not used by copy: use --from and --to"
	from := inv.fs.String("from", "", "the store to copy (required): sqlite:PATH, PATH.db or postgres://...")
	to := inv.fs.String("to", "", "the empty store to copy into (required; created if needed)")
	force := inv.fs.Bool("force", false, "copy even if the source holds live leases (a runtime may be serving it)")
	batch := inv.fs.Int("batch", 1000, "rows written per transaction")
	if err := inv.parse(args, 0); err != nil {
		return err
	}
	switch {
	case inv.db != "":
		return usageErrorf("copy: --db is not used by copy: name the stores with --from and --to")
	case *from == "":
		return usageErrorf("copy: missing --from (usage: duroxide copy %s)", copySynopsis)
	case *to == "":
		return usageErrorf("copy: missing --to (usage: duroxide copy %s)", copySynopsis)
	case *batch < 1 || *batch > 100000:
		return usageErrorf("copy: --batch must be between 1 and 100000, got %d", *batch)
	}
	src, err := copySpec("--from", *from)
	if err != nil {
		return err
	}
	dst, err := copySpec("--to", *to)
	if err != nil {
		return err
	}
	if sameStore(src, dst) {
		return usageErrorf("copy: --from and --to name the same store (%s)", src.Display)
	}

	source, err := inv.openSpec(ctx, src, storeurl.Existing)
	if err != nil {
		return err
	}
	defer closeStore(inv, source)
	target, err := inv.openSpec(ctx, dst, storeurl.Create)
	if err != nil {
		return err
	}
	defer closeStore(inv, target)

	exp, ok := source.(provider.Exporter)
	if !ok {
		return fmt.Errorf("copy: the store %s cannot be copied from: it has no export", src.Display)
	}
	imp, ok := target.(provider.Importer)
	if !ok {
		return fmt.Errorf("copy: the store %s cannot be copied to: it has no import", dst.Display)
	}
	have, err := imp.CopyCounts(ctx)
	if err != nil {
		return dst.WrapErr(err, "copy: counting the rows of %s", dst.Display)
	}
	if have.Total() != 0 {
		return fmt.Errorf("copy: the target %s is not empty (%s): copy only fills an empty store; name a new file or schema", dst.Display, describeCounts(have))
	}

	snap, err := exp.BeginExport(ctx)
	if err != nil {
		return src.WrapErr(err, "copy: reading %s", src.Display)
	}
	defer func() { _ = snap.Close() }()
	want := snap.Counts()
	if l := snap.Leases(); l.Any() {
		if !*force {
			return fmt.Errorf("copy: the source %s looks served: it holds %s; stop every runtime and 'duroxide serve' on it and wait for the leases to expire (up to the lock timeouts), or pass --force to copy anyway", src.Display, describeLeases(l))
		}
		fmt.Fprintf(inv.stderr, "duroxide: copy: --force: copying although the source holds %s\n", describeLeases(l))
	}

	out := inv.stdout
	fmt.Fprintf(out, "copying %s to %s: %s\n", src.Display, dst.Display, describeCounts(want))
	fmt.Fprintln(out, "the source must not be served while it copies: work done on it from now on is not copied")
	began := time.Now()
	prog := &copyProgress{w: inv.stderr, want: want, now: time.Now}
	copied, err := copyRecords(ctx, snap, imp, *batch, prog)
	if err != nil {
		return fmt.Errorf("copy: failed after %d of %d rows, the target %s is partly written (empty it before copying again): %s",
			copied, want.Total(), dst.Display, dst.Redact(src.Redact(err.Error())))
	}

	got, err := imp.CopyCounts(ctx)
	if err != nil {
		return dst.WrapErr(err, "copy: verifying %s", dst.Display)
	}
	if got != want {
		var diffs []string
		for _, t := range provider.Tables {
			if got.Of(t) != want.Of(t) {
				diffs = append(diffs, fmt.Sprintf("%d %s, want %d", got.Of(t), tableLabel(t), want.Of(t)))
			}
		}
		return fmt.Errorf("copy: verification failed: the target %s holds %s", dst.Display, strings.Join(diffs, ", "))
	}
	fmt.Fprintf(out, "verified: every table of %s holds as many rows as the source\n", dst.Display)
	fmt.Fprintf(out, "copied %d rows in %.1fs: %s\n", copied, time.Since(began).Seconds(), describeCounts(want))
	return nil
}

// copySpec parses a --from or --to value.
func copySpec(flagName, raw string) (storeurl.Spec, error) {
	s, err := storeurl.Parse(raw)
	s.Source = flagName
	if err != nil {
		return s, usageErrorf("copy: %s", strings.Replace(err.Error(), "--db", flagName, 1))
	}
	return s, nil
}

// sameStore reports whether two specs name one store.
func sameStore(a, b storeurl.Spec) bool {
	if a.Kind != b.Kind {
		return false
	}
	if a.Kind == storeurl.KindPostgres {
		return a.DSN == b.DSN && a.Schema == b.Schema
	}
	if a.Memory || b.Memory {
		return false // each in-memory store is private
	}
	pa, errA := filepath.Abs(a.Path)
	pb, errB := filepath.Abs(b.Path)
	return errA == nil && errB == nil && pa == pb
}

func closeStore(inv *invocation, s store) {
	if err := s.Close(); err != nil {
		fmt.Fprintf(inv.stderr, "duroxide: closing store: %v\n", err)
	}
}

// copyRecords streams the snapshot into imp, batch rows per Import call.
// It returns how many rows were imported.
func copyRecords(ctx context.Context, snap provider.Snapshot, imp provider.Importer, batch int, prog *copyProgress) (int64, error) {
	var (
		copied int64
		buf    = make([]provider.Record, 0, batch)
	)
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		if err := imp.Import(ctx, buf); err != nil {
			return fmt.Errorf("writing %s rows: %w", buf[0].Table(), err)
		}
		for _, r := range buf {
			prog.add(r.Table())
		}
		copied += int64(len(buf))
		buf = buf[:0]
		return nil
	}
	for rec, err := range snap.Records(ctx) {
		if err != nil {
			return copied, err
		}
		buf = append(buf, rec)
		if len(buf) == batch {
			if err := flush(); err != nil {
				return copied, err
			}
		}
	}
	if err := flush(); err != nil {
		return copied, err
	}
	prog.finish()
	return copied, nil
}

// copyProgress prints, on standard error, a line when a table is done and
// one every copyProgressEvery while a large table is copied.
type copyProgress struct {
	mu      sync.Mutex
	w       io.Writer
	want    provider.TableCounts
	now     func() time.Time
	table   provider.Table
	done    int64
	lastAt  time.Time
	started bool
}

const copyProgressEvery = 2 * time.Second

func (p *copyProgress) add(t provider.Table) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		p.started, p.lastAt = true, p.now()
	}
	if t != p.table {
		p.tableDone()
		p.table, p.done = t, 0
	}
	p.done++
	if p.now().Sub(p.lastAt) >= copyProgressEvery {
		p.lastAt = p.now()
		fmt.Fprintf(p.w, "copy: %s %d/%d\n", tableLabel(p.table), p.done, p.want.Of(p.table))
	}
}

// tableDone reports the end of the current table.
func (p *copyProgress) tableDone() {
	if p.table != "" {
		fmt.Fprintf(p.w, "copy: %s %d/%d done\n", tableLabel(p.table), p.done, p.want.Of(p.table))
	}
}

func (p *copyProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tableDone()
	p.table = ""
}

// describeCounts lists the non-zero counts, or says the store is empty.
func describeCounts(c provider.TableCounts) string {
	var parts []string
	for _, t := range provider.Tables {
		if n := c.Of(t); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, tableLabel(t)))
		}
	}
	if len(parts) == 0 {
		return "nothing to copy"
	}
	return strings.Join(parts, ", ")
}

func describeLeases(l provider.LiveLeases) string {
	return fmt.Sprintf("%d unexpired instance locks, %d activity leases and %d session leases", l.InstanceLocks, l.WorkerLeases, l.Sessions)
}

// tableLabel names a table's rows for people.
func tableLabel(t provider.Table) string {
	switch t {
	case provider.TableHistory:
		return "history events"
	case provider.TableOrchestratorQ:
		return "orchestrator messages"
	case provider.TableWorkerQ:
		return "activity messages"
	}
	return strings.ReplaceAll(string(t), "_", " ")
}
