// Package dashboard serves the duroxide web dashboard: an http.Handler that
// renders pages of instances, their histories, execution locks, webhook
// triggers and queue health from a duroxide.Client, for people to read and
// act on.
//
// # Why it is built this way
//
// The pages are rendered on the server with html/template (which escapes
// every value: instance IDs, names, inputs, outputs, errors and event data
// are user data and render as text), and the few scripts and the style
// sheet are embedded in the binary with go:embed. There is no front-end
// build step, nothing to fetch from a CDN, and the dashboard works in any
// browser with JavaScript for the actions and the live refresh; the pages
// read fine without it.
//
// # What a page shows, and how much
//
// A page is bounded whatever the store holds. Payloads (input, output,
// custom status) are rendered by internal/jsonview: indented at most 16
// levels deep (deeper arrays and objects show as [ … ] and { … }) and cut
// at 64 KiB, in time linear in their size, with a note such as "input is
// 60 KB, nested 9,990 deep: shown truncated; download raw" whose link,
// GET /instances/{id}/raw/{input|output|customStatus}, downloads the
// stored bytes whole. Messages and details are cut at 64 KiB, history rows
// at 1,000 (with a link to the API's full history), timeline bars at 400,
// children at 200.
//
// User text is shown so that it cannot mislead the eye: control
// characters, the Unicode bidirectional controls (a right-to-left override
// in an ID would show it reversed) and invalid UTF-8 are written as
// visible escapes (\u202E, \x1B), and IDs and names sit in <bdi> so that
// right-to-left text cannot reorder its neighbours. An instance page's
// actions carry its ID percent-encoded, not raw.
//
// Times are shown relative to now ("3m ago") in <time> elements whose
// title and datetime carry the absolute time in UTC; instance pages show
// the absolute time beside the relative one too.
//
// # Accessibility
//
// Text keeps a contrast of at least 4.5:1 on its background, charts have
// accessible names that state their last values, the confirmation step of
// an action takes the keyboard focus, and the browser test runs axe-core
// on every page it visits and fails on any serious or critical violation.
//
// Pages read through the same Go Client (and the provider's Admin and lock
// methods) that the JSON API uses, so what the dashboard shows is what the
// API answers. Pages refresh themselves by polling: every few seconds a
// script fetches the page again and swaps in its live sections, so a
// dashboard left open shows instances completing and queues draining
// without a server push channel to keep open.
//
// Actions (start, raise an event, cancel, purge, release a lock) are not
// handled here: each is a fetch() from the page to the JSON API route that
// does it (POST /api/instances, POST /api/instances/{id}/events/{name},
// POST /api/instances/{id}/cancel, DELETE /api/instances/{id},
// DELETE /api/workflows/{id}/lock), with Content-Type: application/json,
// from the same origin. Every action asks for confirmation first and shows
// the API's answer (or its error and details) next to the button. The
// dashboard then needs no CSRF tokens of its own: the API's guards refuse
// what a page of another site could send (a cross-site form cannot set
// that content type, a cross-site fetch() with it needs a CORS preflight
// the server never grants, and the Origin of a state-changing request must
// be an allowed host), and the session cookie is SameSite=Strict.
//
// # Access
//
// With a token (Options.AuthToken, the same as the API's), every page but
// the login page and the static files needs the session cookie; the login
// page takes the token, compares it in constant time and sets the cookie
// (httpapi.SessionCookieName: HttpOnly, SameSite=Strict, Secure when the
// request came over TLS). Behind a TLS-terminating proxy the request
// reaches the server over plain HTTP: set Options.SecureCookies (duroxide
// serve --secure-cookies) to make the cookie Secure anyway, or
// Options.TrustForwardedProto to believe the proxy's X-Forwarded-Proto. Its value is an HMAC of the token
// (httpapi.SessionValue), which the API accepts in place of the bearer
// token, so the page's fetch() calls are authenticated too; changing the
// token ends every session. POST /login and POST /logout need an Origin
// header naming an allowed host. Without a token, the dashboard is served
// like the API: only for the Host names localhost, loopback addresses and
// Options.AllowedHosts.
//
// # Scale
//
// Lists are keyset-paginated through provider.Admin.ListInstances and read
// one page per view; the SQLite store answers every filter from an index
// (its tests assert the query plans), and a page stays a few milliseconds
// with 1,000,000 instances. The counts per state come from the health
// sampler (so they are totals of the whole store: the list says so when an
// orchestration, ID prefix or stalled filter is set, which they do not
// honour), which reads provider.Admin.QueueDepths every few seconds
// (Options.SampleEvery) and keeps the samples in a ring buffer for the
// health chart: a page view never counts the instances table. Counts, which
// counts whole tables, is read at most as often as keeps it under about 2%
// of one reader's time (50 times its last duration apart), so on a large
// store the counts lag a little rather than load it.
package dashboard
