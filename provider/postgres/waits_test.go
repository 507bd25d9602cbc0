package postgres

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlstore"
	"github.com/duroxide/duroxide-go/provider/providertest"
)

func TestPrefixUpperBound(t *testing.T) {
	for _, c := range []struct {
		prefix, want string
		ok           bool
	}{
		{"a", "b", true},
		{"order-", "order.", true},
		{"\u00e9", "\u00ea", true},
		{"x\u007f", "x\u0080", true},        // one byte becomes two
		{"\ud7ff", "\ue000", true},          // skips the surrogates
		{"a\U0010FFFF", "b", true},          // the last character has no successor
		{"\U0010FFFF\U0010FFFF", "", false}, // nothing above every extension
	} {
		got, ok := prefixUpperBound(c.prefix)
		if got != c.want || ok != c.ok {
			t.Errorf("prefixUpperBound(%q) = %q, %v; want %q, %v", c.prefix, got, ok, c.want, c.ok)
		}
	}
	// Every string that starts with a prefix is in [prefix, bound) in byte
	// order, and the bound is valid UTF-8 (PostgreSQL text).
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []rune{'a', 'z', 0x7f, 0x80, 0xe9, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xffff, 0x10000, utf8.MaxRune}
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	for range 2000 {
		p := word(1 + rng.IntN(3))
		s := p + word(rng.IntN(3))
		upper, ok := prefixUpperBound(p)
		if !utf8.ValidString(upper) {
			t.Fatalf("prefixUpperBound(%q) = %q: not valid UTF-8", p, upper)
		}
		if s < p || (ok && s >= upper) {
			t.Fatalf("%q starts with %q but is outside [%q, %q) (bounded %v)", s, p, p, upper, ok)
		}
	}
}

func TestValidUTF8Prefix(t *testing.T) {
	for in, want := range map[string]string{
		"":               "",
		"order-\u00e9":   "order-\u00e9",
		"order-\xc3":     "order-",
		"\xff":           "",
		"ab\xffcd":       "ab",
		"a\uFFFD":        "a\uFFFD", // a real replacement character is valid
		"\u00e9\xe2\x82": "\u00e9",
	} {
		if got := validUTF8Prefix(in); got != want {
			t.Errorf("validUTF8Prefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// An ID prefix that is not valid UTF-8 (it ends inside a character, or
// holds a byte no UTF-8 text has) matches the IDs whose bytes start with
// it, and is never an error.
func TestListInstancesByteLevelPrefix(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	for _, id := range []string{"order-\u00e9", "order-\u00ea", "order-e", "other"} {
		if _, err := p.Enqueue(ctx, providertest.HammerStart(id)); err != nil {
			t.Fatalf("Enqueue(%q): %v", id, err)
		}
	}
	list := func(prefix string) string {
		t.Helper()
		page, err := p.ListInstances(ctx, provider.ListInstancesOptions{IDPrefix: prefix})
		if err != nil {
			t.Fatalf("ListInstances(IDPrefix %q): %v", prefix, err)
		}
		var ids []string
		for _, in := range page.Instances {
			ids = append(ids, in.InstanceID)
		}
		return fmt.Sprintf("%q", ids)
	}
	for prefix, want := range map[string]string{
		"order-\xc3":     `["order-ê" "order-é"]`,
		"order-\xc3\xff": `[]`,
		"\xff":           `[]`,
		"o\xff":          `[]`,
		"order-\u00e9":   `["order-é"]`,
		"order-":         `["order-e" "order-ê" "order-é"]`,
	} {
		if got := list(prefix); got != want {
			t.Errorf("IDPrefix %q: %s, want %s", prefix, got, want)
		}
	}
}

// The statements behind InstanceQueue, StalledInstances, the quiet check
// of WorkAck.Then, an ID-prefix list, and the turn fetch's candidates
// filtered by orchestration name can each be answered from indexes:
// with sequential scans disabled, no plan reads a whole table.
func TestWaitQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	p := openFresh(t, nil)
	ctx := t.Context()
	for _, c := range []struct {
		name, sql string
		args      []any
	}{
		{"queue instance", sharedSQL[sqlstore.QQueueInstance], []any{"x", int64(1000)}},
		{"unserved turn candidates", sqlUnservedTurnCandidates, []any{int64(1000), int64(500), 16}},
		{"queue messages", sharedSQL[sqlstore.QQueueMessages], []any{"x"}},
		{"queue work", sharedSQL[sqlstore.QQueueWork], []any{"x", int64(1000)}},
		{"queue lock", sharedSQL[sqlstore.QQueueLock], []any{"x"}},
		{"queue held locks", sharedSQL[sqlstore.QQueueHeldLocks], []any{"x"}},
		{"queue start", sharedSQL[sqlstore.QQueueStart], []any{"x"}},
		{"stalled", sharedSQL[sqlstore.QStalled], []any{int64(1000), 3, 101, sqlstore.MaxStalledCandidates}},
		{"quiet", sqlInstanceQuiet, []any{"x", int64(1), int64(2), int64(1000), int64(0)}},
		{"turn candidates of named orchestrations", sqlOrchCandidatesNamed, []any{int64(1000), []string{}, "k", 16, []string{"A", "B"}}},
		{"turn candidates of any orchestration", sqlOrchCandidates, []any{int64(1000), []string{}, "k", 16, nil}},
		{"take turn check", sqlInstanceHasWork, []any{"x", []string{"A"}}},
		{"take turn checks", sqlInstancesTakeable, []any{"k", []string{"x", "y"}, []string{"A"}}},
		{"set-based work acks", sqlAckWorks, []any{[]int64{1, 2}, []string{"t1", "t2"}, []*string{nil, new(string)},
			[]string{"", "{}"}, []int64{0, 0}, int64(1000)}},
		{"id prefix", sqlListInstancesBase + sqlListFilterIDFrom + "$1" + sqlListFilterIDBelow + "$2" + sqlListInstancesOrderBy + "$3",
			[]any{"order-", "order.", 101}},
	} {
		err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
				return err
			}
			rows, err := tx.Query(ctx, "EXPLAIN "+c.sql, c.args...)
			if err != nil {
				return err
			}
			plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			text := strings.Join(plan, "\n")
			// worker_routes holds one row per live runtime's announcement
			// of what it serves: reading it whole is the unserved check.
			if strings.Contains(regexp.MustCompile(`Seq Scan on worker_routes\b`).ReplaceAllString(text, ""), "Seq Scan") {
				t.Errorf("%s reads a whole table:\n%s", c.name, text)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
	}
}

// A schema at version 0002 gets the start of each recorded last error
// (its update time: the best it knows) from migration 0003.
func TestMigration0003BackfillsLastErrorSince(t *testing.T) {
	t.Parallel()
	p := openFresh(t, &Options{NoMigrate: true})
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, p, sqlCreateMigrationsTable)
	for _, m := range ms[:2] {
		mustExec(t, p, m.SQL)
		mustExec(t, p, sqlInsertMigration, m.Version, m.Name, 0)
	}
	mustExec(t, p, `INSERT INTO instances (instance_id, status, created_at, updated_at, last_error) VALUES
		('parked', 'Running', 10, 500, '{"kind":"configuration","message":"not registered"}'),
		('fine', 'Running', 10, 600, NULL)`)
	if err := p.Migrate(t.Context()); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	for id, want := range map[string]int64{"parked": 500} {
		q, err := p.InstanceQueue(t.Context(), id)
		if err != nil {
			t.Fatalf("InstanceQueue(%q): %v", id, err)
		}
		if got := q.LastErrorSince.UnixMilli(); got != want {
			t.Errorf("%s: LastErrorSince = %d ms, want %d", id, got, want)
		}
	}
	q, err := p.InstanceQueue(t.Context(), "fine")
	if err != nil {
		t.Fatal(err)
	}
	if !q.LastErrorSince.IsZero() {
		t.Errorf("fine: LastErrorSince = %v, want zero", q.LastErrorSince)
	}
}
