package dashboard_test

import (
	"context"
	"testing"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
)

// TestPauseAndRewindControls checks what the instance page offers: pause
// on a live instance, resume and a paused badge (with who, why and when)
// on a paused one, in the list too, and rewind on a failed one only.
func TestPauseAndRewindControls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	e.start(t, "fail-1", demo.Fail, "card declined", true)
	e.start(t, "wait-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 300}, false)
	e.start(t, "held-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 300}, false)
	if err := e.client.Pause(duroxide.WithActor(ctx, "ops <b>"), "held-1", "partner outage <script>"); err != nil {
		t.Fatal(err)
	}

	waitFor(t, "wait-1 to run", func() bool {
		st, err := e.client.GetStatus(ctx, "wait-1")
		return err == nil && st.State == duroxide.StateRunning
	})
	live := e.get(t, "/instances/wait-1")
	mustContain(t, live, `id="pause-submit"`, `data-action="pause"`, `data-action="rewind-force"`,
		`id="rewind-force-submit" class="danger">Rewind stuck instance…</button>`, `data-confirm="Rewind this Running instance?`)
	mustNotContain(t, live, `id="resume-submit"`, `id="rewind-submit"`, `id="paused"`)

	held := e.get(t, "/instances/held-1")
	mustContain(t, held, `id="resume-submit"`, `id="paused">paused</span>`, `id="paused-by"`,
		"by <bdi>ops &lt;b&gt;</bdi>: <bdi>partner outage &lt;script&gt;</bdi>", `data-kind="paused"`)
	mustNotContain(t, held, `id="pause-submit"`, `id="rewind-submit"`, `id="rewind-force-submit"`, "<script>", "ops <b>")

	failed := e.get(t, "/instances/fail-1")
	mustContain(t, failed, `id="rewind-submit"`, `data-action="rewind"`)
	mustNotContain(t, failed, `id="pause-submit"`, `id="resume-submit"`, `id="rewind-force-submit"`)

	// A rewind: the executions table says which execution it resumes.
	if err := e.client.Rewind(ctx, "fail-1", ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "fail-1 to fail again", func() bool {
		st, err := e.client.GetStatus(ctx, "fail-1")
		return err == nil && st.ExecutionID == 2 && st.State == duroxide.StateFailed
	})
	mustContain(t, e.get(t, "/instances/fail-1"), "(a rewind of execution 1)", `id="rewind-submit"`)

	// A forced rewind of the waiting instance, as its button asks it.
	if p := e.do(t, nil, "POST", "/api/instances/wait-1/rewind", `{"force": true, "by": "dashboard"}`,
		"Content-Type", "application/json"); p.status != 200 {
		t.Fatalf("forced rewind: %d %s", p.status, p.body)
	}
	mustContain(t, e.get(t, "/instances/wait-1"), "(a rewind of execution 1)", `id="rewind-force-submit"`)

	list := e.get(t, "/")
	mustContain(t, list, `<span class="state paused">paused</span>`)
	if p := e.get(t, "/static/app.js"); p.status != 200 {
		t.Fatalf("app.js: %d", p.status)
	} else {
		mustContain(t, p, `"/pause"`, `"/resume"`, `"/rewind"`, `force: true`)
	}
}
