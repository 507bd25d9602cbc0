package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
)

// waitExecution polls id until it is in state at execution exec.
func waitExecution(t *testing.T, client *duroxide.Client, id string, state duroxide.State, exec int64) {
	t.Helper()
	giveUp := time.After(20 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		st, err := client.GetStatus(t.Context(), id)
		if err == nil && st.State == state && st.ExecutionID == exec {
			return
		}
		select {
		case <-giveUp:
			t.Fatalf("%s did not reach %s at execution %d: last %+v, %v", id, state, exec, st, err)
		case <-tick.C:
		}
	}
}

// TestPauseResumeRewind drives pause, resume and rewind against the store
// and through the server: same output and exit codes.
func TestPauseResumeRewind(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	srv, client := apiServer(t, path)
	env := map[string]string{envServer: srv.URL, envAuthToken: testToken}
	remote := func(args ...string) result {
		t.Helper()
		return runCLIEnv(t, env, args...)
	}
	direct := func(args ...string) result {
		t.Helper()
		return runCLI(t, append(args, "--db", db)...)
	}
	for _, mode := range []struct {
		name string
		run  func(args ...string) result
	}{{"direct", direct}, {"remote", remote}} {
		t.Run(mode.name, func(t *testing.T) {
			cli := mode.run
			id := "appr-" + mode.name
			cli("start", "demo.Approval", "--id", id, "--input", `{"timeoutSeconds": 600}`).wantCode(t, 0)
			waitState(t, client, id, duroxide.StateRunning)
			r := cli("pause", id, "--reason", "db maintenance", "--by", "alice").wantCode(t, 0)
			if !strings.Contains(r.stdout, "paused "+id) {
				t.Fatalf("pause printed %q", r.stdout)
			}
			r = cli("status", id).wantCode(t, 0)
			for _, want := range []string{"Paused:", "by alice: db maintenance", "a resume: paused since", "(db maintenance)"} {
				if !strings.Contains(r.stdout, want) {
					t.Fatalf("status of a paused instance lacks %q:\n%s", want, r.stdout)
				}
			}
			var st duroxide.Status
			cli("status", id, "--json").wantCode(t, 0).decode(t, &st)
			if st.Paused == nil || st.Paused.By != "alice" || st.Paused.Reason != "db maintenance" {
				t.Fatalf("status --json: paused %+v", st.Paused)
			}
			cli("pause", id).wantErr(t, 1, "instance "+id+" is already paused", "duroxide resume "+id)
			cli("resume", id).wantCode(t, 0)
			cli("resume", id).wantErr(t, 1, "instance "+id+" is not paused")
			cli("pause", "nope").wantErr(t, 1, `"nope" not found`)
			cli("resume").wantCode(t, 2)

			// Rewind: demo.Fail fails again, at a new execution.
			failing := "fail-" + mode.name
			cli("start", "demo.Fail", "--id", failing, "--input", `"boom"`).wantCode(t, 0)
			waitExecution(t, client, failing, duroxide.StateFailed, 1)
			cli("pause", failing).wantErr(t, 1, "already ended (Failed): nothing to pause")
			r = cli("rewind", failing, "--reason", "retry").wantCode(t, 0)
			if !strings.Contains(r.stdout, "rewound "+failing+": execution 2 resumes it") {
				t.Fatalf("rewind printed %q", r.stdout)
			}
			waitExecution(t, client, failing, duroxide.StateFailed, 2)
			cli("rewind", id).wantErr(t, 1, "cannot rewind "+id, "with force")
			cli("rewind", "nope").wantErr(t, 1, `"nope" not found`)

			// --force takes the Running instance: it starts over at a new
			// execution, the old one ends with the rewind recorded.
			r = cli("rewind", id, "--force", "--reason", "stuck", "--by", "bob").wantCode(t, 0)
			if !strings.Contains(r.stdout, "rewound "+id+": execution 2 resumes it") {
				t.Fatalf("forced rewind printed %q", r.stdout)
			}
			old, err := client.GetHistory(t.Context(), id, 1)
			if err != nil {
				t.Fatal(err)
			}
			if end := old[len(old)-1]; end.Error == nil || end.Error.Message != "rewound by bob: stuck" {
				t.Fatalf("the old execution's end: %+v", end)
			}
		})
	}
	// With no --by, the OS user is the actor (or "duroxide cli").
	runCLI(t, "start", "demo.Approval", "--id", "anon", "--input", `{"timeoutSeconds": 600}`, "--db", db).wantCode(t, 0)
	waitState(t, client, "anon", duroxide.StateRunning)
	direct("pause", "anon").wantCode(t, 0)
	st, err := client.GetStatus(t.Context(), "anon")
	if err != nil || st.Paused == nil || st.Paused.By != defaultActor() {
		t.Fatalf("pause without --by: %+v, %v", st, err)
	}
}
