package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/duroxide/duroxide-go/history"
	"github.com/duroxide/duroxide-go/provider"
	"github.com/duroxide/duroxide-go/provider/internal/sqlenc"
)

// CheckInstanceID validates an instance ID argument before a store opens
// its transaction.
func CheckInstanceID(instanceID string) error {
	if instanceID == "" {
		return sqlenc.Invalid("empty instance ID")
	}
	return nil
}

// InstanceQueue is the body of provider.Admin.InstanceQueue, run in one
// read transaction q (one snapshot, one Batch): the queue state of the
// instance at store time now. A missing instance is ErrNotFound. Driver
// errors come back untranslated (see Querier).
func InstanceQueue(ctx context.Context, q Querier, instanceID string, now time.Time) (*provider.InstanceQueueState, error) {
	s := &provider.InstanceQueueState{Now: now}
	found := false
	stmt := func(id Query, scan func(Row) error) Stmt {
		return Stmt{Query: id, Args: []any{instanceID}, Scan: scan}
	}
	withNow := func(s Stmt, now time.Time) Stmt {
		s.Args = append(s.Args, now.UnixMilli())
		return s
	}
	err := q.Batch(ctx, []Stmt{
		withNow(stmt(QQueueInstance, func(r Row) error {
			var execID, created int64
			var errSince, last *int64
			if err := r.Scan(&execID, &created, &errSince, &last, &s.OrchestrationUnserved); err != nil {
				return err
			}
			found = true
			s.LastProgressAt = MsTime(created)
			if last != nil {
				s.LastProgressAt = MsTime(*last)
			}
			if errSince != nil {
				s.LastErrorSince = MsTime(*errSince)
			}
			return nil
		}), now),
		stmt(QQueueMessages, func(r Row) error {
			var m provider.QueuedMessage
			var item []byte
			var enq, vis, attempts int64
			if err := r.Scan(&item, &enq, &vis, &attempts, &m.Locked); err != nil {
				return err
			}
			m.EnqueuedAt, m.VisibleAt, m.Attempts = MsTime(enq), MsTime(vis), int(attempts)
			if wi, err := history.DecodeWorkItem(item); err != nil {
				m.DecodeError = err.Error()
			} else {
				m.Item = wi
			}
			s.Messages = append(s.Messages, m)
			return nil
		}),
		withNow(stmt(QQueueWork, func(r Row) error {
			var a provider.QueuedActivity
			var item []byte
			var enq, vis, attempts int64
			var locked, errAt *int64
			var errJ, hbDetails *string
			var hbAt *int64
			if err := r.Scan(&a.ExecutionID, &a.ActivityID, &a.SessionID, &item, &enq, &vis, &attempts, &locked, &errJ, &errAt,
				&a.Queue, &hbAt, &hbDetails, &a.Unserved); err != nil {
				return err
			}
			if hbAt != nil {
				a.HeartbeatAt = MsTime(*hbAt)
			}
			if hbDetails != nil {
				a.HeartbeatDetails = json.RawMessage(*hbDetails)
			}
			a.EnqueuedAt, a.VisibleAt, a.Attempts = MsTime(enq), MsTime(vis), int(attempts)
			if locked != nil {
				a.LockedUntil = MsTime(*locked)
			}
			if wi, err := history.DecodeWorkItem(item); err == nil {
				a.Name = wi.Name
			}
			if errJ != nil {
				var d history.ErrorDetails
				if err := json.Unmarshal([]byte(*errJ), &d); err == nil {
					a.Error = &d
				} else {
					a.Error = &history.ErrorDetails{Kind: history.ErrorInfrastructure, Message: "corrupt stored error: " + err.Error()}
				}
				if errAt != nil {
					a.ErrorSince = MsTime(*errAt)
				}
			}
			s.Activities = append(s.Activities, a)
			return nil
		}), now),
		stmt(QQueueLock, func(r Row) error {
			var at, until int64
			if err := r.Scan(&at, &until); err != nil {
				return err
			}
			s.InstanceLock = &provider.InstanceLockState{LockedAt: MsTime(at), LockedUntil: MsTime(until)}
			return nil
		}),
		stmt(QQueueHeldLocks, func(r Row) error {
			var k string
			if err := r.Scan(&k); err != nil {
				return err
			}
			s.HeldLocks = append(s.HeldLocks, k)
			return nil
		}),
		stmt(QQueueStart, func(r Row) error {
			var qs provider.QueuedStart
			var at, vis, pos int64
			if err := r.Scan(&qs.LockKey, &qs.Holder, &at, &vis, &pos); err != nil {
				return err
			}
			qs.QueuedAt, qs.Position = MsTime(at), int(pos)
			if vis > at {
				qs.StartAt = MsTime(vis)
			}
			s.QueuedStart = &qs
			return nil
		}),
	})
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("instance %q: %w", instanceID, provider.ErrNotFound)
	}
	return s, nil
}
