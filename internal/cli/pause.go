package cli

import (
	"context"
	"errors"
	"fmt"
	"os/user"

	"github.com/duroxide/duroxide-go"
)

// defaultActor names who pauses from the command line: the OS user, else
// "duroxide cli".
func defaultActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "duroxide cli"
}

var pauseCommand = &command{
	name:     "pause",
	synopsis: "ID [--reason R] [--by WHO]",
	summary:  "hold a live instance: no turn, no new activity, until resume",
	details: `A paused instance takes no turn and starts no activity. Activities already
running finish; their results, the timers that fire and the events raised
meanwhile wait for 'duroxide resume'. A turn in progress is discarded and
taken again after the resume. The pause is recorded with --reason, --by
(default: the OS user) and the time, and 'duroxide status' shows it. Pausing
an instance that ended or is paused exits 1 (the HTTP API answers 409).`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		reason := inv.fs.String("reason", "", "why, recorded with the pause")
		by := inv.fs.String("by", "", "who pauses, recorded with the pause (default: the OS user)")
		client, id, done, err := inv.openInstance(ctx, args)
		if err != nil {
			return err
		}
		defer done()
		who := *by
		if who == "" {
			who = defaultActor()
		}
		if err := client.Pause(duroxide.WithActor(ctx, who), id, *reason); err != nil {
			switch {
			case errors.Is(err, duroxide.ErrInstanceTerminal):
				return endedError(ctx, client, id, err, "nothing to pause")
			case errors.Is(err, duroxide.ErrAlreadyPaused):
				return fmt.Errorf("instance %s is already paused: resume it with 'duroxide resume %s'", safe(id), safe(id))
			}
			return inv.instanceError(id, err)
		}
		_, err = fmt.Fprintf(inv.stdout, "paused %s: it takes no turn until 'duroxide resume %s'\n", safe(id), safe(id))
		return err
	},
}

var resumeCommand = &command{
	name:     "resume",
	synopsis: "ID",
	summary:  "resume a paused instance",
	details: `Its waiting messages and held activities are taken at once. Resuming an
instance that is not paused exits 1 (the HTTP API answers 409).`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		client, id, done, err := inv.openInstance(ctx, args)
		if err != nil {
			return err
		}
		defer done()
		if err := client.Resume(ctx, id); err != nil {
			if errors.Is(err, duroxide.ErrNotPaused) {
				return fmt.Errorf("instance %s is not paused: nothing to resume", safe(id))
			}
			return inv.instanceError(id, err)
		}
		_, err = fmt.Fprintf(inv.stdout, "resumed %s\n", safe(id))
		return err
	},
}

var rewindCommand = &command{
	name:     "rewind",
	synopsis: "ID [--reason R] [--force [--by WHO]]",
	summary:  "resume a Failed or Canceled (or, with --force, a stuck Running) instance from just before its failed step",
	details: `A new execution resumes the instance with the code the runtimes run now,
from the start of the turn that led to its end: the failed activity runs
again, the results that turn had received are given again, a canceled
instance resumes from before its cancel request, and a failure in the first
turn starts it over with the same input. The failed execution stays as it
was ('duroxide history ID --execution 1'). Rewinding an instance that is not
Failed or Canceled, or whose resume point leaves a sub-orchestration in
flight, exits 1 (the HTTP API answers 409).

--force also rewinds a Running instance that is stuck (an activity failing
and retrying until a partner is fixed, a wait for something that will never
come): its execution ends Canceled, recording --reason and --by (default:
the OS user), its queued activities are dropped, and a new execution goes on
from the start of its last turn with the code deployed now. A Pending or
paused instance, one in the middle of a turn, or one whose cancel is pending
(requested, or queued and not yet taken) is refused (exit 1): let the cancel
finish, then rewind the Canceled instance.`,
	run: func(ctx context.Context, inv *invocation, args []string) error {
		reason := inv.fs.String("reason", "", "why (for the operator's record; a forced rewind records it)")
		force := inv.fs.Bool("force", false, "rewind a stuck Running instance too")
		by := inv.fs.String("by", "", "with --force, who rewinds, recorded (default: the OS user)")
		client, id, done, err := inv.openInstance(ctx, args)
		if err != nil {
			return err
		}
		defer done()
		who := *by
		if who == "" {
			who = defaultActor()
		}
		opts := &duroxide.RewindOptions{Reason: *reason, Force: *force}
		if err := client.RewindWithOptions(duroxide.WithActor(ctx, who), id, opts); err != nil {
			if errors.Is(err, duroxide.ErrStateConflict) {
				return fmt.Errorf("cannot rewind %s: %v", safe(id), safe(oneLine(err.Error())))
			}
			return inv.instanceError(id, err)
		}
		st, err := client.GetStatus(ctx, id)
		if err != nil {
			return inv.instanceError(id, err)
		}
		_, err = fmt.Fprintf(inv.stdout, "rewound %s: execution %d resumes it ('duroxide status %s')\n", safe(id), st.ExecutionID, safe(id))
		return err
	},
}

func (r *remote) Pause(ctx context.Context, instanceID, reason string) error {
	body := map[string]string{"reason": reason}
	if by := duroxide.ActorFrom(ctx); by != "" {
		body["by"] = by
	}
	_, _, err := r.do(ctx, "POST", "/api/instances/"+pathID(instanceID)+"/pause", body, nil)
	return err
}

func (r *remote) Resume(ctx context.Context, instanceID string) error {
	_, _, err := r.do(ctx, "POST", "/api/instances/"+pathID(instanceID)+"/resume", nil, nil)
	return err
}

func (r *remote) RewindWithOptions(ctx context.Context, instanceID string, opts *duroxide.RewindOptions) error {
	body := map[string]any{"reason": opts.Reason}
	if opts.Force {
		body["force"] = true
	}
	if by := duroxide.ActorFrom(ctx); by != "" {
		body["by"] = by
	}
	_, _, err := r.do(ctx, "POST", "/api/instances/"+pathID(instanceID)+"/rewind", body, nil)
	return err
}
