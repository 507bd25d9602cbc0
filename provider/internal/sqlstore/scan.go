package sqlstore

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// Row is one result row of either driver: *sql.Row, *sql.Rows, pgx.Row
// and pgx.Rows all scan into the same destinations (a NULL column into a
// nil pointer).
type Row interface {
	Scan(dest ...any) error
}

// MsTime converts a stored epoch-milliseconds timestamp to a UTC time.
func MsTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// Page sizes of the listing calls (ListInstances, ListWaits).
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// cursorPrefix versions the opaque ListInstances cursor.
const cursorPrefix = "v1:"

// EncodeCursor returns the ListInstances cursor that continues after the
// instance numbered seq.
func EncodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(seq, 10)))
}

// DecodeCursor reads a cursor made by EncodeCursor; anything else is
// ErrInvalidArgument.
func DecodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, sqlenc.Invalid("malformed cursor %q", c)
	}
	s, ok := strings.CutPrefix(string(b), cursorPrefix)
	if !ok {
		return 0, sqlenc.Invalid("malformed cursor %q", c)
	}
	seq, err := strconv.ParseInt(s, 10, 64)
	if err != nil || seq < 1 {
		return 0, sqlenc.Invalid("malformed cursor %q", c)
	}
	return seq, nil
}

// NullJSON returns a stored JSON column as a RawMessage, nil for NULL.
func NullJSON(s *string) json.RawMessage {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

// NullError decodes a stored ErrorDetails column.
func NullError(s *string) (*history.ErrorDetails, error) {
	if s == nil {
		return nil, nil
	}
	var d history.ErrorDetails
	if err := json.Unmarshal([]byte(*s), &d); err != nil {
		return nil, fmt.Errorf("%w: error details: %w", provider.ErrCorruptData, err)
	}
	return &d, nil
}

// ScanInstanceInfo scans the instance columns (each store's
// instanceColumns), after extra; a column that cannot be decoded is
// ErrCorruptData.
func ScanInstanceInfo(r Row, extra ...any) (*provider.InstanceInfo, error) {
	in, err := ScanInstanceRow(r, extra...)
	if err != nil {
		return nil, err
	}
	if in.Corrupt != nil {
		return nil, fmt.Errorf("instance %q: %w", in.InstanceID, in.Corrupt)
	}
	return &in.InstanceInfo, nil
}

// InstanceRow is a scanned instance row. Corrupt is set (wrapping
// provider.ErrCorruptData) when a stored JSON column cannot be decoded;
// the fields that decoded are filled in, the others left empty.
type InstanceRow struct {
	provider.InstanceInfo
	Corrupt error
}

// CorruptRowMessage starts the LastError message of a listed instance
// whose row could not be fully decoded.
const CorruptRowMessage = "corrupt stored row: "

// MarkCorrupt returns the listed form of a row that could not be fully
// decoded: the fields that decoded, and LastError describing the damage.
func (in *InstanceRow) MarkCorrupt() provider.InstanceInfo {
	info := in.InstanceInfo
	info.LastError = &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: CorruptRowMessage + in.Corrupt.Error()}
	return info
}

// ScanInstanceRow scans the instance columns, after extra. A column that
// cannot be decoded is left empty and reported in Corrupt; only a failure
// to scan is an error.
func ScanInstanceRow(r Row, extra ...any) (*InstanceRow, error) {
	var (
		in                          provider.InstanceInfo
		status                      string
		input, output, errJ, custom *string
		lastErr                     *string
		created, updated            int64
	)
	dest := append(extra, &in.InstanceID, &in.OrchestrationName, &in.OrchestrationVersion, &status,
		&in.CurrentExecutionID, &input, &output, &errJ, &custom, &in.CustomStatusVersion,
		&in.ParentInstanceID, &in.ParentExecutionID, &created, &updated, &lastErr, &in.ValuesVersion)
	if err := r.Scan(dest...); err != nil {
		return nil, err
	}
	row := &InstanceRow{}
	var bad []string
	in.Status = provider.Status(status)
	for _, c := range []struct {
		name string
		col  *string
		dst  *json.RawMessage
	}{{"input", input, &in.Input}, {"output", output, &in.Output}, {"custom status", custom, &in.CustomStatus}} {
		if v := NullJSON(c.col); v != nil && !json.Valid(v) {
			bad = append(bad, c.name+" is not valid JSON")
		} else {
			*c.dst = v
		}
	}
	var err error
	if in.Error, err = NullError(errJ); err != nil {
		bad = append(bad, "error details are not valid JSON")
	}
	if in.LastError, err = NullError(lastErr); err != nil {
		bad = append(bad, "last error details are not valid JSON")
	}
	in.CreatedAt, in.UpdatedAt = MsTime(created), MsTime(updated)
	row.InstanceInfo = in
	if len(bad) > 0 {
		row.Corrupt = fmt.Errorf("%w: %s", provider.ErrCorruptData, strings.Join(bad, "; "))
	}
	return row, nil
}

// ScanExecutionInfo scans the execution columns (each store's
// executionColumns).
func ScanExecutionInfo(r Row) (*provider.ExecutionInfo, error) {
	var (
		e                   provider.ExecutionInfo
		status              string
		input, output, errJ *string
		started             int64
		completed           *int64
	)
	if err := r.Scan(&e.ExecutionID, &status, &input, &output, &errJ, &started, &completed, &e.EventCount); err != nil {
		return nil, err
	}
	e.Status = provider.Status(status)
	e.Input, e.Output = NullJSON(input), NullJSON(output)
	var err error
	if e.Error, err = NullError(errJ); err != nil {
		return nil, fmt.Errorf("execution %d: %w", e.ExecutionID, err)
	}
	e.StartedAt = MsTime(started)
	if completed != nil {
		e.CompletedAt = MsTime(*completed)
	}
	return &e, nil
}

// StoredEvent is one history row before decoding.
type StoredEvent struct {
	ID   int64
	Data []byte
}

// DecodeEvents decodes history rows; a failure wraps ErrCorruptData.
func DecodeEvents(rows []StoredEvent) ([]history.Event, error) {
	evs := make([]history.Event, 0, len(rows))
	for _, r := range rows {
		ev, err := history.DecodeEvent(r.Data)
		if err != nil {
			if r.ID == 0 { // the row's event ID was not read
				return nil, fmt.Errorf("%w: %w", provider.ErrCorruptData, err)
			}
			return nil, fmt.Errorf("%w: event %d: %w", provider.ErrCorruptData, r.ID, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
