package dashboard_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
)

// screenshotDir receives a screenshot of every page the browser test
// visits (gitignored).
const screenshotDir = "testdata/screenshots"

// findChromium returns the path of a Chromium or Chrome in PATH, or "".
func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser drives a headless Chromium against e's server.
type browser struct {
	t   *testing.T
	ctx context.Context
	url string
}

func newBrowser(t *testing.T, e *env) *browser {
	t.Helper()
	path := findChromium()
	if path == "" {
		t.Skip("no Chromium installed (looked for chromium, chromium-browser, google-chrome in PATH): skipping the browser test; install one, e.g. apt-get install chromium")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run sandboxed as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first run starts the browser; it must not have a timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, ctx: ctx, url: e.srv.URL}
}

// do runs steps within a time limit.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v%s", what, err, b.diagnose())
	}
}

// diagnose saves a screenshot of the page as failure.png and returns its
// URL and text, for the message of a failed step.
func (b *browser) diagnose() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.WriteFile(filepath.Join(screenshotDir, "failure.png"), png, 0o644)
	}
	text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	return "\npage (screenshot in " + screenshotDir + "/failure.png):\n" + text
}

// text returns the text of the first element matching sel, waiting for
// one to exist. It reads in one evaluation: the live refresh may replace
// the element at any time, so a node looked up earlier can be gone.
func (b *browser) text(sel string) string {
	b.t.Helper()
	deadline := time.Now().Add(testTimeout)
	js := `(function(){const el = document.querySelector(` + jsString(sel) + `); return el ? "+" + el.textContent : "";})()`
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		cancel()
		if err == nil && s != "" {
			return s[1:]
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("reading %s: %v%s", sel, err, b.diagnose())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// click clicks the first visible element matching sel in one evaluation,
// waiting for one to show. Pages with live sections use it for every
// action: a refresh replaces those sections, and one that adds rows moves
// what is below it, so a click by coordinates (chromedp.Click) could land
// on whatever moved there.
// The element must not navigate (use chromedp.Navigate for links).
func (b *browser) click(sel string) {
	b.t.Helper()
	deadline := time.Now().Add(testTimeout)
	js := `(function(){const el = document.querySelector(` + jsString(sel) + `); if (!el || el.offsetParent === null) return false; el.click(); return true;})()`
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("clicking %s: %v%s", sel, err, b.diagnose())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the text of sel contains want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testTimeout)
	defer cancel()
	js := `(function(){const el = document.querySelector(` + jsString(sel) + `); return !!el && el.textContent.includes(` + jsString(want) + `);})()`
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		got := "(missing)"
		if s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector(`+jsString(sel)+`)||{}).textContent || "(missing)"`)); err == nil {
			got = s
		}
		b.t.Fatalf("waiting for %s to contain %q: %v; it holds %q", sel, want, err, got)
	}
}

// waitURL waits until the page's URL contains want and the page has
// loaded (after a form submission or a click on a link). Evaluations that
// fail because the page is navigating are retried.
func (b *browser) waitURL(want string) {
	b.t.Helper()
	deadline := time.Now().Add(testTimeout)
	js := `location.href.includes(` + jsString(want) + `) && document.readyState === "complete"`
	for {
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for the URL to contain %q: %v", want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGone waits until no element matches sel.
func (b *browser) waitGone(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector(`+jsString(sel)+`) === null`, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s to go: %v%s", sel, err, b.diagnose())
	}
}

// shot saves a full-page screenshot as name.png.
func (b *browser) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, testTimeout)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// location returns the page's URL path.
func (b *browser) location() string {
	b.t.Helper()
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		b.t.Fatal(err)
	}
	return strings.TrimPrefix(loc, b.url)
}

func jsString(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}

// TestBrowser walks the dashboard in headless Chromium as an operator
// would: log in, list and filter, read a failed instance's error and why a
// waiting one waits, raise an event and watch the instance complete,
// cancel, start, purge, release a lock, cancel two instances by filter
// after a preview, read the health page, log out.
func TestBrowser(t *testing.T) {
	t.Parallel()
	const token = "browser-test-token-0123456789"
	e := newEnv(t, envOptions{token: token, refresh: 300 * time.Millisecond})
	ctx := context.Background()
	e.start(t, "hello-1", demo.Hello, "Ada", true)
	e.start(t, "fail-1", demo.Fail, "card declined: insufficient funds", true)
	e.start(t, "wait-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 600}, false)
	e.start(t, "cancel-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 600}, false)
	e.start(t, "bulk-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 600}, false)
	e.start(t, "bulk-2", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 600}, false)
	if err := e.client.StartOrchestration(ctx, "locked-1", demo.Approval, demo.ApprovalInput{TimeoutSeconds: 600},
		&duroxide.StartOptions{LockKey: "payments-42"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "wait-1 to subscribe to its event", func() bool {
		h, err := e.client.GetHistory(ctx, "wait-1", 0)
		return err == nil && len(h) >= 3
	})
	b := newBrowser(t, e)

	// Log in: a wrong token is refused, the right one lands on the list.
	b.do("opening the dashboard", chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	b.shot("login")
	b.checkAccessibility("login")
	b.do("a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#login-error")))
	if got := b.text("#login-error"); got != "Wrong token." {
		t.Fatalf("login error %q", got)
	}
	b.shot("login-wrong-token")
	b.do("the token", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login")))
	b.do("the list", chromedp.WaitVisible(chromedp.CSS("#instances")))
	b.waitText("#instances", "fail-1")
	b.waitText("#count-failed", "1")
	b.shot("instances")
	b.checkAccessibility("instances list")

	// Filter: failed instances only.
	b.do("filtering Failed", chromedp.SetValue(chromedp.CSS("#filter-state"), "Failed"), chromedp.Click(chromedp.CSS("#apply-filters")))
	b.waitURL("state=Failed")
	if got := b.text("#instances"); !strings.Contains(got, "fail-1") || strings.Contains(got, "hello-1") || strings.Contains(got, "wait-1") {
		t.Fatalf("Failed filter lists:\n%s", got)
	}
	b.shot("instances-failed")
	b.do("filtering by ID prefix", chromedp.Navigate(b.url+"/"), chromedp.WaitVisible(chromedp.CSS("#filter-prefix")), chromedp.SendKeys(chromedp.CSS("#filter-prefix"), "wait-"))
	b.click("#apply-filters")
	b.waitURL("prefix=wait-")
	if got := b.text("#instances"); !strings.Contains(got, "wait-1") || strings.Contains(got, "fail-1") {
		t.Fatalf("prefix filter lists:\n%s", got)
	}

	// A failed instance says why it failed.
	b.do("listing failed instances", chromedp.Navigate(b.url+"/?state=Failed"))
	href, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`(document.querySelector("#instances a.instance-link") || {}).href || ""`))
	if err != nil || href != b.url+"/instances/fail-1" {
		t.Fatalf("the failed instance's link: %q, %v", href, err)
	}
	b.do("opening fail-1", chromedp.Navigate(href))
	b.do("reading the error", chromedp.WaitVisible(chromedp.CSS("#error-message")))
	if got := b.text("#error-message"); got != "card declined: insufficient funds" {
		t.Fatalf("error message %q", got)
	}
	b.shot("instance-failed")
	b.checkAccessibility("failed instance")
	if got := b.text("#error-kind"); !strings.HasPrefix(got, "application error") {
		t.Fatalf("error kind %q", got)
	}

	// A waiting instance says what it waits for.
	b.do("opening wait-1", chromedp.Navigate(b.url+"/instances/wait-1"), chromedp.WaitVisible(chromedp.CSS("#waiting")))
	b.waitText(`#waiting li[data-kind="event"]`, "approval")
	b.waitText(`#waiting li[data-kind="timer"]`, "fires at")
	b.shot("instance-waiting")
	b.checkAccessibility("waiting instance")

	// Raise the event the instance waits for (the form offers its name)
	// and watch the instance complete.
	if name, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("#raise-name").value`)); err != nil || name != "approval" {
		t.Fatalf("the raise form's event name: %q, %v", name, err)
	}
	b.do("raising approval", chromedp.SendKeys(chromedp.CSS("#raise-data"), "true"))
	b.click("#raise-submit")
	if focused, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.activeElement ? document.activeElement.id : ""`)); err != nil || focused != "raise-confirm" {
		t.Fatalf("focus after Raise is on %q (%v), want the Confirm button", focused, err)
	}
	b.shot("raise-confirm")
	b.click("#raise-confirm")
	b.waitText("#raise-result", "Event raised")
	b.waitText("#state", "Completed")
	b.waitText("#output", "approved")
	// The actions that need a live instance go when it ends.
	b.waitGone("#raise-form")
	b.waitGone("#cancel-form")
	b.shot("instance-completed")

	// A raise on an ended instance shows the API's error (the form is
	// gone after the refresh, so use the API's refusal on cancel-1 after
	// canceling it instead).
	b.do("opening cancel-1", chromedp.Navigate(b.url+"/instances/cancel-1"), chromedp.WaitVisible(chromedp.CSS("#cancel-submit")), chromedp.SendKeys(chromedp.CSS("#cancel-reason"), "customer asked"))
	b.click("#cancel-submit")
	b.click("#cancel-confirm")
	b.waitText("#state", "Canceled")
	b.waitText("#failure", "customer asked")
	b.waitGone("#cancel-form")
	// The answer outlives the form the refresh removed (the instance ended
	// at once: its code returned on the canceled wait).
	b.waitText("#cancel-result", "Cancel requested")
	b.shot("instance-canceled")

	// Rewind the canceled instance: a new execution resumes it, waiting
	// again. Then pause it (a badge says so) and resume it.
	b.do("rewinding cancel-1", chromedp.Navigate(b.url+"/instances/cancel-1"), chromedp.WaitVisible(chromedp.CSS("#rewind-submit")))
	b.click("#rewind-submit")
	b.shot("rewind-confirm")
	b.click("#rewind-confirm")
	b.waitText("#rewind-result", "Rewound: execution 2")
	b.waitText("#state", "Running")
	b.do("pausing cancel-1", chromedp.Navigate(b.url+"/instances/cancel-1"), chromedp.WaitVisible(chromedp.CSS("#pause-submit")), chromedp.SendKeys(chromedp.CSS("#pause-reason"), "partner outage"))
	b.click("#pause-submit")
	b.click("#pause-confirm")
	b.waitText("#pause-result", "Paused")
	b.waitText("#paused", "paused")
	b.waitText("#paused-by", "partner outage")
	b.shot("instance-paused")
	b.checkAccessibility("paused instance")
	if st, err := e.client.GetStatus(ctx, "cancel-1"); err != nil || st.Paused == nil || st.Paused.By != "dashboard" {
		t.Fatalf("cancel-1 after the pause: %+v, %v", st, err)
	}
	b.do("resuming cancel-1", chromedp.Navigate(b.url+"/instances/cancel-1"), chromedp.WaitVisible(chromedp.CSS("#resume-submit")))
	b.click("#resume-submit")
	b.click("#resume-confirm")
	b.waitText("#resume-result", "Resumed.")
	b.waitGone("#paused")

	// Release the execution lock held by locked-1.
	b.do("opening the locks", chromedp.Navigate(b.url+"/locks"), chromedp.WaitVisible(chromedp.CSS("#lock-table")))
	b.waitText("#lock-table", "payments-42")
	b.waitText("#lock-table", "locked-1")
	b.shot("locks")
	b.checkAccessibility("locks")
	// The locks table is a live section: click in one evaluation each.
	b.click(".release-submit")
	b.click(".release-confirm")
	b.waitText("#locks", "No execution locks are held.")
	if l, err := e.client.GetLock(ctx, "payments-42"); err != nil || l.IsLocked {
		t.Fatalf("lock after release: %+v, %v", l, err)
	}

	// Pause a schedule from the schedules page.
	if _, err := e.client.CreateSchedule(ctx, "nightly", &duroxide.ScheduleDefinition{Cron: "0 2 * * *",
		TimeZone: "Europe/Paris", Orchestration: demo.Hello, Input: []byte(`"Ada"`)}, false); err != nil {
		t.Fatal(err)
	}
	b.do("opening the schedules", chromedp.Navigate(b.url+"/schedules"), chromedp.WaitVisible(chromedp.CSS("#schedule-table")))
	b.waitText("#schedule-table", "nightly")
	b.shot("schedules")
	b.checkAccessibility("schedules")
	b.click(".pause-submit")
	b.click(".pause-confirm")
	b.waitText("#schedules", "paused")
	if s, err := e.client.GetSchedule(ctx, "nightly"); err != nil || !s.Paused {
		t.Fatalf("schedule after pause: %+v, %v", s, err)
	}

	// Start an instance with JSON input from the list page.
	b.do("starting", chromedp.Navigate(b.url+"/"))
	b.click("#start-box summary")
	b.do("filling in the start form", chromedp.WaitVisible(chromedp.CSS("#start-orchestration")),
		chromedp.SendKeys(chromedp.CSS("#start-orchestration"), demo.Sequence), chromedp.SendKeys(chromedp.CSS("#start-id"), "started-1"),
		chromedp.SendKeys(chromedp.CSS("#start-input"), "{bad json"))
	b.click("#start-submit")
	b.waitText("#start-box .result", "not valid JSON")
	b.do("fixing the input", chromedp.SetValue(chromedp.CSS("#start-input"), "37"))
	b.click("#start-submit")
	b.click("#start-box .confirm-yes")
	b.waitText("#start-box .result", "Started started-1")
	b.shot("started")
	// A refused action shows the API's error: the same ID again.
	b.click("#start-submit")
	b.click("#start-box .confirm-yes")
	b.waitText("#start-box .result", "Failed (409)")
	st, err := e.client.WaitForOrchestration(ctx, "started-1")
	if err != nil {
		t.Fatal(err)
	}
	var out int
	if err := st.Decode(&out); err != nil || out != 42 {
		t.Fatalf("started-1: %d, %v", out, err)
	}

	// Purge the failed instance.
	b.do("purging fail-1", chromedp.Navigate(b.url+"/instances/fail-1"), chromedp.WaitVisible(chromedp.CSS("#purge-submit")))
	b.click("#purge-submit")
	b.click("#purge-confirm")
	b.waitText("#purge-result", "Purged.")
	if _, err := e.client.GetStatus(ctx, "fail-1"); !errors.Is(err, duroxide.ErrNotFound) {
		t.Fatalf("fail-1 after purge: %v", err)
	}

	// Health.
	b.do("opening health", chromedp.Navigate(b.url+"/health"), chromedp.WaitVisible(chromedp.CSS("#depths")))
	b.shot("health")
	b.checkAccessibility("health")

	// Bulk actions: preview a cancel by ID prefix (the confirmation
	// shows the count; nothing changes before it), confirm, and watch the
	// job end.
	b.do("opening bulk actions", chromedp.Navigate(b.url+"/bulk"), chromedp.WaitVisible(chromedp.CSS("#bulk-form")))
	b.checkAccessibility("bulk actions")
	b.do("previewing a bulk cancel", chromedp.SetValue(chromedp.CSS("#bulk-action"), "cancel"), chromedp.SendKeys(chromedp.CSS("#bulk-prefix"), "bulk-"), chromedp.SendKeys(chromedp.CSS("#bulk-reason"), "incident"))
	b.click("#bulk-preview")
	b.waitText("#bulk-confirm-text", "cancel 2 instances")
	for _, id := range []string{"bulk-1", "bulk-2"} {
		if st, err := e.client.GetStatus(ctx, id); err != nil || st.State.IsTerminal() {
			t.Fatalf("the preview changed %s: %+v, %v", id, st, err)
		}
	}
	b.shot("bulk-confirm")
	b.checkAccessibility("bulk confirmation")
	b.click("#bulk-confirm")
	b.waitText("#bulk-result", "Done: 2 of 2 instances, 2 succeeded")
	b.waitText("#bulk-jobs", "cancel")
	b.shot("bulk-done")
	for _, id := range []string{"bulk-1", "bulk-2"} {
		if st, err := e.client.WaitForOrchestration(ctx, id); err != nil || st.State != duroxide.StateCanceled {
			t.Fatalf("%s after the bulk cancel: %+v, %v", id, st, err)
		}
	}

	// Log out: the pages want the token again.
	b.do("logging out", chromedp.Click(chromedp.CSS("#logout")))
	b.waitURL("/login")
	b.do("opening a page", chromedp.Navigate(b.url+"/locks"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if loc := b.location(); !strings.HasPrefix(loc, "/login") {
		t.Fatalf("after logout, /locks is at %s", loc)
	}
}
