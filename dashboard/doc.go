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
// sampler, which reads provider.Admin.QueueDepths every few seconds
// (Options.SampleEvery) and keeps the samples in a ring buffer for the
// health chart: a page view never counts the instances table. Counts, which
// counts whole tables, is read at most as often as keeps it under about 2%
// of one reader's time (50 times its last duration apart), so on a large
// store the counts lag a little rather than load it.
package dashboard
