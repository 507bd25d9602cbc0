package httpapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/demo"
	"github.com/duroxide/duroxide-go/httpapi"
	"github.com/duroxide/duroxide-go/provider/sqlite"
)

// Secrets of the signed triggers, as their environment holds them.
var testSecrets = map[string]string{
	"HMAC_SECRET":   "hmac-secret",
	"B64_SECRET":    "b64-secret",
	"GH_SECRET":     "gh-secret",
	"STRIPE_SECRET": "whsec_test",
	"SHARED_TOKEN":  "tok-3f9a",
	"EMPTY_SECRET":  "",
}

func lookupTestEnv(key string) (string, bool) {
	v, ok := testSecrets[key]
	return v, ok
}

func sign(secret string, parts ...string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func signHex(secret string, parts ...string) string {
	return hex.EncodeToString(sign(secret, parts...))
}

// stripeHeader is a Stripe-Signature header for body at t with the given
// secrets' v1 signatures.
func stripeHeader(t time.Time, body string, secrets ...string) string {
	ts := fmt.Sprint(t.Unix())
	h := "t=" + ts
	for _, s := range secrets {
		h += ",v1=" + signHex(s, ts, ".", body)
	}
	return h
}

// signedTriggers are one trigger of each scheme, all starting demo.Hello.
func signedTriggers() []httpapi.Trigger {
	tr := func(id string, a *httpapi.TriggerAuth) httpapi.Trigger {
		return httpapi.Trigger{ID: id, Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel, Auth: a}
	}
	return []httpapi.Trigger{
		tr("hmac", &httpapi.TriggerAuth{Type: httpapi.AuthHMAC, SecretEnv: "HMAC_SECRET", Header: "X-Signature", Prefix: "sha256="}),
		tr("b64", &httpapi.TriggerAuth{Type: httpapi.AuthHMAC, SecretEnv: "B64_SECRET", Header: "X-Sig", Encoding: httpapi.EncodingBase64}),
		tr("gh", &httpapi.TriggerAuth{Type: httpapi.AuthGitHub, SecretEnv: "GH_SECRET"}),
		tr("stripe", &httpapi.TriggerAuth{Type: httpapi.AuthStripe, SecretEnv: "STRIPE_SECRET"}),
		tr("stripe2m", &httpapi.TriggerAuth{Type: httpapi.AuthStripe, SecretEnv: "STRIPE_SECRET", Tolerance: httpapi.Duration{Duration: 2 * time.Minute}}),
		tr("tok", &httpapi.TriggerAuth{Type: httpapi.AuthToken, SecretEnv: "SHARED_TOKEN", Header: "X-Webhook-Token", Prefix: "Token "}),
		tr("open", &httpapi.TriggerAuth{Type: httpapi.AuthNone}),
	}
}

// postSigned posts body to a trigger's webhook with headers (name, value
// pairs) and returns the answer, checking its shape.
func (e *env) postSigned(t *testing.T, trigger, body string, headers ...string) webhookAnswer {
	t.Helper()
	req, err := http.NewRequest("POST", e.srv.URL+"/api/webhooks/"+trigger, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		t.Fatal(err)
	}
	a := webhookAnswer{status: res.StatusCode}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatalf("decoding %s: %v", buf.Bytes(), err)
	}
	for k := range m {
		a.keys = append(a.keys, k)
	}
	slices.Sort(a.keys)
	if err := json.Unmarshal(buf.Bytes(), &a); err != nil {
		t.Fatal(err)
	}
	checkWebhookShape(t, a)
	return a
}

// TestWebhookSignatures sends real requests to a trigger of each scheme:
// only authenticated calls start an instance; the others are 401 with
// "success": false, counted by trigger and reason.
func TestWebhookSignatures(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	e := newEnvClock(t, &httpapi.Options{Triggers: signedTriggers(), LookupEnv: lookupTestEnv, Clock: clock,
		AuthToken: "server-token"}, clock, false)
	now := clock.Now()
	// A body with the whitespace a sender's JSON encoder leaves: the
	// signature covers the raw bytes.
	const body = "{\"name\": \"Ada\"}\n"
	const other = `{"name": "Mallory"}`

	var started []string
	cases := []struct {
		name, trigger, body string
		headers             []string
		// reason is the expected failure ("" = authenticated).
		reason, errMsg string
	}{
		{"hmac good", "hmac", body, []string{"X-Signature", "sha256=" + signHex("hmac-secret", body)}, "", ""},
		{"hmac upper-case hex", "hmac", body, []string{"X-Signature", "sha256=" + strings.ToUpper(signHex("hmac-secret", body))}, "", ""},
		{"hmac missing header", "hmac", body, nil, "missing", "missing signature"},
		{"hmac wrong secret", "hmac", body, []string{"X-Signature", "sha256=" + signHex("guess", body)}, "mismatch", "invalid signature"},
		{"hmac signature of another body", "hmac", body, []string{"X-Signature", "sha256=" + signHex("hmac-secret", other)}, "mismatch", "invalid signature"},
		{"hmac signature of the trimmed body", "hmac", body, []string{"X-Signature", "sha256=" + signHex("hmac-secret", strings.TrimSpace(body))}, "mismatch", "invalid signature"},
		{"hmac without prefix", "hmac", body, []string{"X-Signature", signHex("hmac-secret", body)}, "malformed", "invalid signature"},
		{"hmac not hex", "hmac", body, []string{"X-Signature", "sha256=zz"}, "malformed", "invalid signature"},
		{"base64 good", "b64", body, []string{"X-Sig", base64.StdEncoding.EncodeToString(sign("b64-secret", body))}, "", ""},
		{"base64 unpadded", "b64", body, []string{"X-Sig", base64.RawStdEncoding.EncodeToString(sign("b64-secret", body))}, "", ""},
		{"base64 given hex", "b64", body, []string{"X-Sig", signHex("b64-secret", body)}, "mismatch", "invalid signature"},
		{"github good", "gh", body, []string{"X-Hub-Signature-256", "sha256=" + signHex("gh-secret", body)}, "", ""},
		{"github sha1 header only", "gh", body, []string{"X-Hub-Signature", "sha1=00"}, "missing", "missing signature"},
		{"github bad", "gh", body, []string{"X-Hub-Signature-256", "sha256=" + signHex("gh-secret", other)}, "mismatch", "invalid signature"},
		{"stripe good", "stripe", body, []string{"Stripe-Signature", stripeHeader(now, body, "whsec_test")}, "", ""},
		{"stripe rolled secret: one of two v1 matches", "stripe", body,
			[]string{"Stripe-Signature", stripeHeader(now, body, "whsec_old", "whsec_test") + ",v0=abc"}, "", ""},
		{"stripe 4 min old", "stripe", body, []string{"Stripe-Signature", stripeHeader(now.Add(-4*time.Minute), body, "whsec_test")}, "", ""},
		{"stripe 6 min old", "stripe", body, []string{"Stripe-Signature", stripeHeader(now.Add(-6*time.Minute), body, "whsec_test")}, "stale", "stale signature"},
		{"stripe 6 min ahead", "stripe", body, []string{"Stripe-Signature", stripeHeader(now.Add(6*time.Minute), body, "whsec_test")}, "stale", "stale signature"},
		{"stripe 3 min old, 2 min tolerance", "stripe2m", body, []string{"Stripe-Signature", stripeHeader(now.Add(-3*time.Minute), body, "whsec_test")}, "stale", "stale signature"},
		{"stripe replay with a new timestamp", "stripe", body,
			[]string{"Stripe-Signature", fmt.Sprintf("t=%d,v1=%s", now.Unix(), signHex("whsec_test", fmt.Sprint(now.Add(-time.Hour).Unix()), ".", body))}, "mismatch", "invalid signature"},
		{"stripe another body", "stripe", other, []string{"Stripe-Signature", stripeHeader(now, body, "whsec_test")}, "mismatch", "invalid signature"},
		{"stripe no v1", "stripe", body, []string{"Stripe-Signature", fmt.Sprintf("t=%d,v0=%s", now.Unix(), signHex("whsec_test", body))}, "malformed", "invalid signature"},
		{"stripe no timestamp", "stripe", body, []string{"Stripe-Signature", "v1=" + signHex("whsec_test", body)}, "malformed", "invalid signature"},
		{"stripe missing", "stripe", body, nil, "missing", "missing signature"},
		{"token good", "tok", body, []string{"X-Webhook-Token", "Token tok-3f9a"}, "", ""},
		{"token wrong", "tok", body, []string{"X-Webhook-Token", "Token tok-3f9b"}, "mismatch", "invalid token"},
		{"token prefix of the secret", "tok", body, []string{"X-Webhook-Token", "Token tok-3f9"}, "mismatch", "invalid token"},
		{"token without its prefix", "tok", body, []string{"X-Webhook-Token", "tok-3f9a"}, "mismatch", "invalid token"},
		{"token missing", "tok", body, nil, "missing", "missing token"},
		{"token in the bearer header", "tok", body, []string{"Authorization", "Bearer tok-3f9a"}, "missing", "missing token"},
		{"unauthenticated trigger", "open", body, nil, "", ""},
	}
	failures := map[string]int{}
	for _, tc := range cases {
		a := e.postSigned(t, tc.trigger, tc.body, tc.headers...)
		if tc.reason == "" {
			if a.status != http.StatusOK || a.Duplicate {
				t.Errorf("%s: got %s, want a start", tc.name, a)
				continue
			}
			started = append(started, a.ExecutionID)
			continue
		}
		failures[tc.trigger+" "+tc.reason]++
		if a.status != http.StatusUnauthorized || a.Error != tc.errMsg || a.Details == "" {
			t.Errorf("%s: got %s, want 401 %q", tc.name, a, tc.errMsg)
		}
		for _, s := range testSecrets {
			if s != "" && strings.Contains(a.Details, s) {
				t.Errorf("%s: details %q reveal a secret", tc.name, a.Details)
			}
		}
	}

	// Only the authenticated calls started instances.
	var list struct {
		Instances []struct {
			InstanceID string `json:"instanceId"`
		} `json:"instances"`
	}
	e.expect(t, "GET", "/api/instances?limit=1000", nil, http.StatusOK, &list)
	var got []string
	for _, in := range list.Instances {
		got = append(got, in.InstanceID)
	}
	slices.Sort(got)
	slices.Sort(started)
	if !slices.Equal(got, started) {
		t.Fatalf("instances %v, want exactly the authenticated starts %v", got, started)
	}

	// Every reason of every signed trigger is exposed, zero or not.
	for _, tr := range signedTriggers() {
		if tr.Auth.Type == httpapi.AuthNone {
			if v := e.metric(t, fmt.Sprintf(`duroxide_webhook_auth_failures_total{reason="missing",trigger=%q}`, tr.ID)); v != "" {
				t.Errorf("unauthenticated trigger %s has auth failures %s", tr.ID, v)
			}
			continue
		}
		for _, reason := range []string{"missing", "malformed", "mismatch", "stale"} {
			sample := fmt.Sprintf(`duroxide_webhook_auth_failures_total{reason=%q,trigger=%q}`, reason, tr.ID)
			if got, want := e.metric(t, sample), fmt.Sprint(failures[tr.ID+" "+reason]); got != want {
				t.Errorf("%s = %q, want %s", sample, got, want)
			}
		}
	}
}

// TestWebhookSignatureBeforeIdempotency: an unauthenticated call cannot
// learn, through a duplicate answer, which instance a key started.
func TestWebhookSignatureBeforeIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, &httpapi.Options{LookupEnv: lookupTestEnv, Triggers: []httpapi.Trigger{
		{ID: "gh", Orchestration: demo.Hello, Concurrency: httpapi.ConcurrencyParallel, IdempotencyKeyPath: "/id",
			Auth: &httpapi.TriggerAuth{Type: httpapi.AuthGitHub, SecretEnv: "GH_SECRET"}},
	}}, nil, false)
	body := `{"id": "delivery-1"}`
	sig := "sha256=" + signHex("gh-secret", body)
	first := e.postSigned(t, "gh", body, "X-Hub-Signature-256", sig)
	if first.status != http.StatusOK {
		t.Fatalf("signed call: %s", first)
	}
	if a := e.postSigned(t, "gh", body, "X-Hub-Signature-256", "sha256="+signHex("gh-secret", "x")); a.status != http.StatusUnauthorized || a.ExecutionID != "" {
		t.Fatalf("unsigned repeat: got %s, want 401 naming no instance", a)
	}
	if a := e.postSigned(t, "gh", body, "X-Hub-Signature-256", sig); !a.Duplicate || a.ExecutionID != first.ExecutionID {
		t.Fatalf("signed repeat: got %s, want a duplicate of %s", a, first.ExecutionID)
	}
}

func newTestHandler(t *testing.T, opts *httpapi.Options) (http.Handler, error) {
	t.Helper()
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if opts.Logger == nil {
		opts.Logger = discard
	}
	return httpapi.NewHandler(duroxide.NewClient(db), opts)
}

// TestTriggerAuthStartup: secrets come from the environment, and an
// unsigned trigger needs "none" when the server has a token.
func TestTriggerAuthStartup(t *testing.T) {
	t.Parallel()
	gh := func(env string) *httpapi.TriggerAuth {
		return &httpapi.TriggerAuth{Type: httpapi.AuthGitHub, SecretEnv: env}
	}
	for _, tc := range []struct {
		name      string
		auth      *httpapi.TriggerAuth
		authToken string
		// errHas is empty when NewHandler must succeed.
		errHas []string
	}{
		{"secret set", gh("GH_SECRET"), "tok", nil},
		{"secret unset", gh("NO_SUCH_SECRET"), "", []string{`trigger "t"`, "NO_SUCH_SECRET", "not set"}},
		{"secret empty", gh("EMPTY_SECRET"), "", []string{"EMPTY_SECRET", "empty"}},
		{"no auth, no server token (loopback development)", nil, "", nil},
		{"no auth with a server token", nil, "tok", []string{`trigger "t"`, "auth is required", `"none"`}},
		{"explicitly unauthenticated with a server token", &httpapi.TriggerAuth{Type: httpapi.AuthNone}, "tok", nil},
		{"bad auth", &httpapi.TriggerAuth{Type: "md5", SecretEnv: "GH_SECRET"}, "", []string{"trigger 0", "auth", "md5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := newTestHandler(t, &httpapi.Options{LookupEnv: lookupTestEnv, AuthToken: tc.authToken,
				Triggers: []httpapi.Trigger{{ID: "t", Orchestration: demo.Hello, Auth: tc.auth}}})
			if tc.errHas == nil {
				if err != nil {
					t.Fatalf("NewHandler: %v", err)
				}
				return
			}
			if !errors.Is(err, duroxide.ErrInvalidArgument) {
				t.Fatalf("NewHandler: %v, want ErrInvalidArgument", err)
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestParseTriggerAuth(t *testing.T) {
	t.Parallel()
	ts, err := httpapi.ParseTriggers(strings.NewReader(`{"triggers": [
		{"id": "gh", "orchestration": "o", "auth": {"type": "github", "secretEnv": "GH_SECRET"}},
		{"id": "st", "orchestration": "o", "auth": {"type": "stripe", "secretEnv": "STRIPE_SECRET"}},
		{"id": "st2", "orchestration": "o", "auth": {"type": "stripe", "secretEnv": "STRIPE_SECRET", "header": "X-Stripe", "tolerance": "10m"}},
		{"id": "hm", "orchestration": "o", "auth": {"type": "hmac", "secretEnv": "S", "header": "X-Sig"}},
		{"id": "tk", "orchestration": "o", "auth": {"type": "token", "secretEnv": "S", "header": "X-Token", "prefix": "Bearer "}},
		{"id": "no", "orchestration": "o", "auth": {"type": "none"}}
	]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []httpapi.TriggerAuth{
		{Type: httpapi.AuthGitHub, SecretEnv: "GH_SECRET", Header: "X-Hub-Signature-256", Encoding: httpapi.EncodingHex, Prefix: "sha256="},
		{Type: httpapi.AuthStripe, SecretEnv: "STRIPE_SECRET", Header: "Stripe-Signature", Tolerance: httpapi.Duration{Duration: 5 * time.Minute}},
		{Type: httpapi.AuthStripe, SecretEnv: "STRIPE_SECRET", Header: "X-Stripe", Tolerance: httpapi.Duration{Duration: 10 * time.Minute}},
		{Type: httpapi.AuthHMAC, SecretEnv: "S", Header: "X-Sig", Encoding: httpapi.EncodingHex},
		{Type: httpapi.AuthToken, SecretEnv: "S", Header: "X-Token", Prefix: "Bearer "},
		{Type: httpapi.AuthNone},
	}
	for i, w := range want {
		if ts[i].Auth == nil || *ts[i].Auth != w {
			t.Errorf("trigger %s: auth %+v, want %+v", ts[i].ID, ts[i].Auth, w)
		}
	}
	// The defaults survive a second validation (NewHandler's).
	if _, err := newTestHandler(t, &httpapi.Options{LookupEnv: func(string) (string, bool) { return "x", true }, Triggers: ts}); err != nil {
		t.Fatalf("NewHandler with parsed triggers: %v", err)
	}

	for _, tc := range []struct {
		name, auth string
		errHas     []string
	}{
		{"the secret itself", `{"type": "github", "secret": "s3cr3t"}`, []string{"secret"}},
		{"no type", `{"secretEnv": "S"}`, []string{"trigger 0", "auth", "type is required"}},
		{"unknown type", `{"type": "md5", "secretEnv": "S"}`, []string{"auth", "md5"}},
		{"no secretEnv", `{"type": "github"}`, []string{"auth", "secretEnv is required"}},
		{"secretEnv with =", `{"type": "github", "secretEnv": "A=B"}`, []string{"secretEnv"}},
		{"hmac without header", `{"type": "hmac", "secretEnv": "S"}`, []string{"header is required"}},
		{"token without header", `{"type": "token", "secretEnv": "S"}`, []string{"header is required"}},
		{"bad header name", `{"type": "hmac", "secretEnv": "S", "header": "X Sig"}`, []string{"header", "X Sig"}},
		{"bad encoding", `{"type": "hmac", "secretEnv": "S", "header": "X-Sig", "encoding": "base32"}`, []string{"encoding", "base32"}},
		{"tolerance on hmac", `{"type": "hmac", "secretEnv": "S", "header": "X-Sig", "tolerance": "1m"}`, []string{"tolerance"}},
		{"negative tolerance", `{"type": "stripe", "secretEnv": "S", "tolerance": "-1m"}`, []string{"tolerance", "negative"}},
		{"prefix on stripe", `{"type": "stripe", "secretEnv": "S", "prefix": "x"}`, []string{"prefix"}},
		{"github in base64", `{"type": "github", "secretEnv": "S", "encoding": "base64"}`, []string{"encoding"}},
		{"none with a secret", `{"type": "none", "secretEnv": "S"}`, []string{"secretEnv"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := httpapi.ParseTriggers(strings.NewReader(`{"triggers": [{"id": "t", "orchestration": "o", "auth": ` + tc.auth + `}]}`))
			if err == nil {
				t.Fatal("ParseTriggers accepted it")
			}
			for _, s := range tc.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// TestTriggersListAuth: GET /api/triggers shows the auth settings and the
// environment variable's name, never the secret.
func TestTriggersListAuth(t *testing.T) {
	t.Parallel()
	e := newEnvClock(t, &httpapi.Options{LookupEnv: lookupTestEnv, Triggers: signedTriggers()}, nil, false)
	res := e.expect(t, "GET", "/api/triggers", nil, http.StatusOK, nil)
	if !strings.Contains(string(res.body), `"secretEnv":"GH_SECRET"`) {
		t.Errorf("triggers %s do not name GH_SECRET", res.body)
	}
	for _, s := range testSecrets {
		if s != "" && strings.Contains(string(res.body), s) {
			t.Errorf("triggers %s reveal a secret", res.body)
		}
	}
}

// TestTriggerRegistration: a trigger naming an orchestration or version
// the registry lacks fails NewHandler when the server hosts the runtime,
// and is a warning when it does not.
func TestTriggerRegistration(t *testing.T) {
	t.Parallel()
	reg := duroxide.NewRegistry()
	demo.Register(reg)
	db, err := sqlite.Open(context.Background(), "", &sqlite.Options{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rt, err := duroxide.StartRuntime(context.Background(), db, reg, &duroxide.RuntimeOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		_ = rt.Shutdown(ctx)
	})
	client := duroxide.NewClient(db)
	for _, tc := range []struct {
		name       string
		trigger    httpapi.Trigger
		reg        *duroxide.Registry
		rt         *duroxide.Runtime
		errHas     string // "" = NewHandler succeeds
		warningHas string // "" = nothing logged
	}{
		{"registered", httpapi.Trigger{ID: "t", Orchestration: demo.Hello}, reg, rt, "", ""},
		{"registered version", httpapi.Trigger{ID: "t", Orchestration: demo.Hello, Version: "1.0.0"}, reg, rt, "", ""},
		{"unknown orchestration, hosted runtime", httpapi.Trigger{ID: "t", Orchestration: "demo.Helo"}, reg, rt, `"demo.Helo" is not registered`, ""},
		{"unknown version, hosted runtime", httpapi.Trigger{ID: "t", Orchestration: demo.Hello, Version: "2.0.0"}, reg, rt, `no version "2.0.0" (registered: 1.0.0)`, ""},
		{"unknown orchestration, no runtime", httpapi.Trigger{ID: "t", Orchestration: "demo.Helo"}, reg, nil, "", "trigger=t error="},
		{"no registry", httpapi.Trigger{ID: "t", Orchestration: "my.Orch", Version: "1.2.0"}, nil, nil, "", "my.Orch 1.2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			_, err := httpapi.NewHandler(client, &httpapi.Options{Registry: tc.reg, Runtime: tc.rt, Logger: logger,
				Triggers: []httpapi.Trigger{tc.trigger}})
			switch {
			case tc.errHas == "" && err != nil:
				t.Fatalf("NewHandler: %v", err)
			case tc.errHas != "" && (!errors.Is(err, duroxide.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.errHas)):
				t.Fatalf("NewHandler: %v, want ErrInvalidArgument containing %q", err, tc.errHas)
			}
			if tc.warningHas == "" {
				if logs.Len() != 0 {
					t.Fatalf("logged %q, want nothing", logs.String())
				}
			} else if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), tc.warningHas) {
				t.Fatalf("logged %q, want a warning containing %q", logs.String(), tc.warningHas)
			}
		})
	}
}
