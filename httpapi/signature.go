package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
)

// TriggerAuth says how a webhook call proves that it comes from the
// trigger's sender. Webhooks are exempt from the server's bearer token
// (third parties cannot send it): a trigger's auth protects its route.
//
// The secret is never written in the trigger: SecretEnv names the
// environment variable that holds it, read once by NewHandler.
type TriggerAuth struct {
	// Type is the scheme. Required.
	Type AuthType `json:"type"`
	// SecretEnv names the environment variable holding the secret: the
	// HMAC key, or the token of AuthToken. Required for every type but
	// AuthNone. NewHandler fails if the variable is unset or empty.
	SecretEnv string `json:"secretEnv,omitempty"`
	// Header is the request header carrying the signature or the token.
	// Required for AuthHMAC and AuthToken; AuthStripe defaults to
	// "Stripe-Signature", AuthGitHub to "X-Hub-Signature-256".
	Header string `json:"header,omitempty"`
	// Encoding is how an AuthHMAC signature is written: EncodingHex (the
	// default) or EncodingBase64. AuthGitHub is always hex.
	Encoding SignatureEncoding `json:"encoding,omitempty"`
	// Prefix precedes the signature (AuthHMAC, such as "sha256=") or the
	// token (AuthToken, such as "Bearer ") in the header (default: none;
	// AuthGitHub: "sha256=").
	Prefix string `json:"prefix,omitempty"`
	// Tolerance is how far the timestamp of an AuthStripe signature may
	// be from the server's clock, in the past or the future (default
	// DefaultStripeTolerance, 5 min). Only for AuthStripe.
	Tolerance Duration `json:"tolerance,omitzero"`
}

// AuthType is the scheme of a TriggerAuth.
type AuthType string

// Authentication schemes of triggers.
const (
	// AuthNone accepts unsigned calls: anyone who can reach the server
	// can start the trigger's orchestration.
	AuthNone AuthType = "none"
	// AuthHMAC wants in Header the HMAC-SHA256 of the raw request body
	// keyed with the secret, written with Encoding after Prefix.
	AuthHMAC AuthType = "hmac"
	// AuthStripe wants Stripe's scheme: "Stripe-Signature:
	// t=<unix seconds>,v1=<hex>[,v1=<hex>...]", each v1 being a candidate
	// HMAC-SHA256 of "<t>.<body>"; one must match, and t must be within
	// Tolerance of the server's clock.
	AuthStripe AuthType = "stripe"
	// AuthGitHub wants GitHub's scheme: "X-Hub-Signature-256:
	// sha256=<hex HMAC-SHA256 of the body>".
	AuthGitHub AuthType = "github"
	// AuthToken wants Header to carry Prefix followed by the secret
	// itself, a shared token, compared in constant time.
	AuthToken AuthType = "token"
)

// SignatureEncoding is how an HMAC signature is written in its header.
type SignatureEncoding string

// Signature encodings.
const (
	// EncodingHex is lower- or upper-case hexadecimal.
	EncodingHex SignatureEncoding = "hex"
	// EncodingBase64 is standard base64, padded or not.
	EncodingBase64 SignatureEncoding = "base64"
)

// DefaultStripeTolerance is TriggerAuth.Tolerance when it is 0.
const DefaultStripeTolerance = 5 * time.Minute

// Default headers of the presets.
const (
	headerStripeSignature = "Stripe-Signature"
	headerGitHubSignature = "X-Hub-Signature-256"
	githubPrefix          = "sha256="
)

// Reasons of authentication failures, the reason label of
// duroxide_webhook_auth_failures_total.
const (
	authMissing   = "missing"   // no signature or token header
	authMalformed = "malformed" // a header that cannot be parsed
	authMismatch  = "mismatch"  // no signature matches, or a wrong token
	authStale     = "stale"     // a Stripe timestamp outside the tolerance
)

// authReasons lists the reasons in the order /metrics writes them.
var authReasons = [...]string{authMissing, authMalformed, authMismatch, authStale}

// normalizeAuth validates a trigger's auth and fills in its defaults. It
// accepts its own output unchanged.
func normalizeAuth(a TriggerAuth) (TriggerAuth, error) {
	none := func(field, value string) error {
		if value != "" {
			return fmt.Errorf("%s does not apply to type %q", field, a.Type)
		}
		return nil
	}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	switch a.Type {
	case AuthNone:
		check(none("secretEnv", a.SecretEnv))
		check(none("header", a.Header))
		check(none("encoding", string(a.Encoding)))
		check(none("prefix", a.Prefix))
	case AuthHMAC:
		switch a.Encoding {
		case "":
			a.Encoding = EncodingHex
		case EncodingHex, EncodingBase64:
		default:
			check(fmt.Errorf("encoding must be %q or %q, got %q", EncodingHex, EncodingBase64, a.Encoding))
		}
		if a.Header == "" {
			check(fmt.Errorf("header is required: the request header carrying the signature"))
		}
	case AuthToken:
		check(none("encoding", string(a.Encoding)))
		if a.Header == "" {
			check(fmt.Errorf("header is required: the request header carrying the token"))
		}
	case AuthStripe:
		check(none("encoding", string(a.Encoding)))
		check(none("prefix", a.Prefix))
		if a.Header == "" {
			a.Header = headerStripeSignature
		}
		if a.Tolerance.Duration < 0 {
			check(fmt.Errorf("tolerance must not be negative, got %s", a.Tolerance.Duration))
		}
		if a.Tolerance.Duration == 0 {
			a.Tolerance.Duration = DefaultStripeTolerance
		}
	case AuthGitHub:
		if a.Encoding != "" && a.Encoding != EncodingHex {
			check(fmt.Errorf("encoding of type %q is always %q", a.Type, EncodingHex))
		}
		if a.Prefix != "" && a.Prefix != githubPrefix {
			check(fmt.Errorf("prefix of type %q is always %q", a.Type, githubPrefix))
		}
		a.Encoding, a.Prefix = EncodingHex, githubPrefix
		if a.Header == "" {
			a.Header = headerGitHubSignature
		}
	case "":
		return a, fmt.Errorf("type is required: %q, %q, %q, %q or %q", AuthHMAC, AuthStripe, AuthGitHub, AuthToken, AuthNone)
	default:
		return a, fmt.Errorf("type must be %q, %q, %q, %q or %q, got %q", AuthHMAC, AuthStripe, AuthGitHub, AuthToken, AuthNone, a.Type)
	}
	if a.Type != AuthStripe && a.Tolerance.Duration != 0 {
		check(fmt.Errorf("tolerance only applies to type %q", AuthStripe))
	}
	if a.Type != AuthNone {
		switch {
		case a.SecretEnv == "":
			check(fmt.Errorf("secretEnv is required: the name of the environment variable holding the secret (never the secret itself)"))
		case strings.ContainsAny(a.SecretEnv, "=\x00"):
			check(fmt.Errorf("secretEnv %q is not an environment variable name", a.SecretEnv))
		}
		if a.Header != "" && !validHeaderName(a.Header) {
			check(fmt.Errorf("header %q is not a valid header name", a.Header))
		}
	}
	if len(errs) > 0 {
		return a, errs[0]
	}
	return a, nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110), as header
// names are.
func validHeaderName(s string) bool {
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}

// verifier checks the calls of one trigger with auth.
type verifier struct {
	auth   TriggerAuth
	secret []byte
	clock  clockwork.Clock
	// failures count the refused calls, by authReasons index.
	failures [len(authReasons)]atomic.Int64
}

// authFailure is a refused call: 401 with a reason.
type authFailure struct {
	reason  string
	message string
	details string
}

func (f *authFailure) apiError() error {
	return &apiError{status: http.StatusUnauthorized, message: f.message, details: f.details}
}

// newVerifiers resolves the secrets of the triggers' auth and applies the
// rule of unauthenticated triggers: a trigger without auth is refused when
// the server requires a token (requireAuth) unless its auth is AuthNone.
func newVerifiers(ts []Trigger, requireAuth bool, lookupEnv func(string) (string, bool), clock clockwork.Clock) (map[string]*verifier, error) {
	out := map[string]*verifier{}
	for i := range ts {
		t := &ts[i]
		if t.Auth == nil {
			if requireAuth {
				return nil, fmt.Errorf("trigger %q: auth is required when the server has an auth token: "+
					`sign the webhook ("auth": {"type": "hmac", ...}, "stripe", "github" or "token"), or accept unsigned calls with "auth": {"type": "none"}`, t.ID)
			}
			continue
		}
		if t.Auth.Type == AuthNone {
			continue
		}
		secret, ok := lookupEnv(t.Auth.SecretEnv)
		if !ok || secret == "" {
			return nil, fmt.Errorf("trigger %q: auth: the environment variable %s (secretEnv) is not set or empty", t.ID, t.Auth.SecretEnv)
		}
		out[t.ID] = &verifier{auth: *t.Auth, secret: []byte(secret), clock: clock}
	}
	return out, nil
}

// verify checks a call's headers and raw body; nil means authenticated.
// The failure is counted.
func (v *verifier) verify(h http.Header, body []byte) *authFailure {
	f := v.check(h, body)
	if f != nil {
		for i, r := range authReasons {
			if r == f.reason {
				v.failures[i].Add(1)
			}
		}
	}
	return f
}

func (v *verifier) check(h http.Header, body []byte) *authFailure {
	a := &v.auth
	value := h.Get(a.Header)
	if value == "" {
		what := "signature"
		if a.Type == AuthToken {
			what = "token"
		}
		return &authFailure{reason: authMissing, message: "missing " + what,
			details: fmt.Sprintf("this webhook requires a %s header (%s)", a.Header, describeAuth(a))}
	}
	switch a.Type {
	case AuthToken:
		got, ok := strings.CutPrefix(value, a.Prefix)
		// Hashing both sides makes the comparison constant-time whatever
		// the lengths.
		gs, ws := sha256.Sum256([]byte(got)), sha256.Sum256(v.secret)
		if !ok || subtle.ConstantTimeCompare(gs[:], ws[:]) != 1 {
			return &authFailure{reason: authMismatch, message: "invalid token",
				details: fmt.Sprintf("the %s header does not carry this webhook's token", a.Header)}
		}
		return nil
	case AuthStripe:
		return v.checkStripe(value, body)
	}
	// AuthHMAC and AuthGitHub.
	enc, ok := strings.CutPrefix(value, a.Prefix)
	var sig []byte
	var err error
	if ok {
		sig, err = decodeSignature(a.Encoding, enc)
	}
	if !ok || err != nil {
		return &authFailure{reason: authMalformed, message: "invalid signature",
			details: fmt.Sprintf("the %s header must be %s", a.Header, describeAuth(a))}
	}
	if !hmac.Equal(sig, v.mac(body)) {
		return &authFailure{reason: authMismatch, message: "invalid signature",
			details: fmt.Sprintf("the %s header does not match the body signed with this webhook's secret", a.Header)}
	}
	return nil
}

// checkStripe checks a Stripe-Signature header: t=<unix>,v1=<hex>...
// Entries other than t and v1 (v0, future schemes) are ignored, as are v1
// values that are not hex.
func (v *verifier) checkStripe(value string, body []byte) *authFailure {
	a := &v.auth
	var ts string
	var sigs [][]byte
	malformed := false
	for item := range strings.SplitSeq(value, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch k {
		case "t":
			malformed = malformed || ts != ""
			ts = val
		case "v1":
			if sig, err := hex.DecodeString(val); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if malformed || err != nil || len(sigs) == 0 {
		return &authFailure{reason: authMalformed, message: "invalid signature",
			details: fmt.Sprintf("the %s header must be t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">", a.Header)}
	}
	want := v.mac([]byte(ts), []byte("."), body)
	match := false
	for _, sig := range sigs {
		// Every candidate is compared, so the time taken does not tell
		// which one matched.
		if hmac.Equal(sig, want) {
			match = true
		}
	}
	if !match {
		return &authFailure{reason: authMismatch, message: "invalid signature",
			details: fmt.Sprintf("no v1 signature of the %s header matches the timestamp and body signed with this webhook's secret", a.Header)}
	}
	skew := v.clock.Now().Sub(time.Unix(unix, 0))
	if skew > a.Tolerance.Duration || -skew > a.Tolerance.Duration {
		return &authFailure{reason: authStale, message: "stale signature",
			details: fmt.Sprintf("the %s timestamp is %s away from the server's clock, more than the tolerance of %s; a replayed call is refused",
				a.Header, skew.Abs().Round(time.Second), formatDuration(a.Tolerance.Duration))}
	}
	return nil
}

// mac is the HMAC-SHA256 of the concatenated parts with the secret.
func (v *verifier) mac(parts ...[]byte) []byte {
	m := hmac.New(sha256.New, v.secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func decodeSignature(enc SignatureEncoding, s string) ([]byte, error) {
	if enc == EncodingBase64 {
		if strings.HasSuffix(s, "=") {
			return base64.StdEncoding.DecodeString(s)
		}
		return base64.RawStdEncoding.DecodeString(s)
	}
	return hex.DecodeString(s)
}

// describeAuth tells a caller what the header must hold, without the
// secret.
func describeAuth(a *TriggerAuth) string {
	switch a.Type {
	case AuthToken:
		if a.Prefix != "" {
			return fmt.Sprintf("%q followed by the shared token", a.Prefix)
		}
		return "the shared token"
	case AuthStripe:
		return "t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">"
	}
	if a.Prefix == "" {
		return fmt.Sprintf("the %s HMAC-SHA256 of the raw body", a.Encoding)
	}
	return fmt.Sprintf("%q followed by the %s HMAC-SHA256 of the raw body", a.Prefix, a.Encoding)
}

// writeWebhookAuthMetrics writes duroxide_webhook_auth_failures_total:
// every reason of every trigger with a signature or token, zero or not.
func (s *server) writeWebhookAuthMetrics(m *metricsWriter) {
	const name = "duroxide_webhook_auth_failures_total"
	m.family(name, "counter",
		"Webhook calls refused with 401, by trigger and reason (missing: no signature or token header; malformed: an unparsable header; mismatch: a wrong signature or token; stale: a Stripe timestamp outside the tolerance).")
	for _, t := range s.triggers {
		v := s.verifiers[t.ID]
		if v == nil {
			continue
		}
		for i, r := range authReasons {
			m.sample(name, v.failures[i].Load(), "trigger", t.ID, "reason", r)
		}
	}
}
