package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/duroxide/duroxide-go"
	"github.com/duroxide/duroxide-go/internal/jsonview"
	"github.com/duroxide/duroxide-go/internal/logkey"
)

// pageNames are the page templates; each is parsed with layout.html.
var pageNames = []string{"instances", "instance", "locks", "schedules", "health", "bulk", "login", "error"}

// parsePages parses every page with the layout.
func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, err
		}
		pages[name] = t
	}
	return pages, nil
}

// page is what every template gets: the page's own data and the layout's.
type page struct {
	Title string
	// Nav is the current section: instances, locks, bulk, health.
	Nav string
	// LoggedIn shows the logout button.
	LoggedIn bool
	// RefreshMs is how often the live parts refresh (0: never).
	RefreshMs int64
	Now       time.Time
	Data      any
}

// errorView is the error page's data.
type errorView struct {
	Title, Details string
}

// render writes the page name with data and status.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	p := &page{Now: d.clock.Now(), Data: data, LoggedIn: d.access.TokenRequired() && d.access.Authorized(r)}
	switch v := data.(type) {
	case *instancesView:
		p.Title, p.Nav, p.RefreshMs = "Instances", "instances", d.refresh.Milliseconds()
	case *instanceView:
		p.Title, p.Nav = "Instance "+visible(cut(v.Status.InstanceID, 200)), "instances"
		if !v.Status.State.IsTerminal() {
			p.RefreshMs = d.refresh.Milliseconds()
		}
	case *locksView:
		p.Title, p.Nav, p.RefreshMs = "Locks and triggers", "locks", d.refresh.Milliseconds()
	case *schedulesView:
		p.Title, p.Nav, p.RefreshMs = "Schedules", "schedules", d.refresh.Milliseconds()
	case *bulkView:
		p.Title, p.Nav, p.RefreshMs = "Bulk actions", "bulk", d.refresh.Milliseconds()
	case *healthView:
		p.Title, p.Nav, p.RefreshMs = "Health", "health", d.refresh.Milliseconds()
	case *loginView:
		p.Title, p.LoggedIn = "Log in", false
	case *errorView:
		p.Title = v.Title
	}
	var buf bytes.Buffer
	if err := d.pages[name].Execute(&buf, p); err != nil {
		d.log.Error("rendering dashboard page", logkey.Path, r.URL.Path, logkey.Error, err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// funcs are the template helpers.
var funcs = template.FuncMap{
	"ago":       ago,
	"duration":  humanDuration,
	"abs":       absTime,
	"when":      func(now, t time.Time) template.HTML { return when(now, t, false) },
	"whenAbs":   func(now, t time.Time) template.HTML { return when(now, t, true) },
	"vis":       visible,
	"visml":     func(s string) string { return visibleMultiline(cut(s, maxShownText)) },
	"cut":       func(s string, n int) string { return cut(s, n) },
	"errorType": errorType,
	"errorKind": errorKind,
	"lower":     strings.ToLower,
	"pathEsc":   pathEscape,
	"allStates": func() []duroxide.State { return states },
}

// maxShownText bounds a message or details text shown on a page.
const maxShownText = 64 << 10

// ago says when t was, relative to now, in words: "3m 20s ago", "in 5s".
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	switch {
	case d >= 0 && d < time.Second:
		return "just now"
	case d >= 0:
		return humanDuration(d) + " ago"
	default:
		return "in " + humanDuration(-d)
	}
}

// humanDuration writes d with at most two units: "1h 5m", "3.2s", "12ms".
func humanDuration(d time.Duration) string {
	if d < 0 {
		return "-" + humanDuration(-d)
	}
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// payloadView is a JSON payload as a page shows it: rendered within the
// bounds of jsonview, with a note and a link to the raw bytes when cut.
type payloadView struct {
	Text string
	// Note says what was left out ("" when nothing was).
	Note string
	// RawURL downloads the stored bytes.
	RawURL string
}

// payloadLimits bound each payload shown on a page.
var payloadLimits = &jsonview.Options{MaxBytes: 64 << 10, MaxDepth: 16}

// viewPayload renders raw for a page: indented within payloadLimits, with
// the HTML escapes of encoding/json (\u003c, \u003e, \u0026) turned back
// into the characters they stand for (the page shows what the
// orchestration sent; html/template escapes it) and invisible characters
// escaped. what names the payload in the note ("input"); rawURL
// downloads it whole.
func viewPayload(raw json.RawMessage, what, rawURL string) payloadView {
	if len(raw) == 0 {
		return payloadView{}
	}
	v := jsonview.Render(raw, payloadLimits)
	p := payloadView{Text: visibleMultiline(unescapeHTMLEscapes(v.Text)), RawURL: rawURL}
	if v.Truncated {
		p.Note = what + " is " + v.Describe() + ": shown truncated"
		if !v.Valid {
			p.Note = what + " is " + v.Describe() + " of invalid JSON: shown truncated"
		}
	}
	return p
}

// unescapeHTMLEscapes replaces the escapes \u003c, \u003e and \u0026 inside
// the strings of valid JSON text js by <, > and &. Every backslash in a
// JSON string starts an escape, so scanning escape by escape never
// mistakes an escaped backslash followed by "u003c" for one.
func unescapeHTMLEscapes(js string) string {
	if !strings.Contains(js, `\u00`) {
		return js
	}
	var b strings.Builder
	b.Grow(len(js))
	for i := 0; i < len(js); i++ {
		c := js[i]
		if c != '\\' || i+1 >= len(js) {
			b.WriteByte(c)
			continue
		}
		if js[i+1] == 'u' && i+6 <= len(js) {
			switch strings.ToLower(js[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteByte(c)
		b.WriteByte(js[i+1])
		i++
	}
	return b.String()
}

// pathEscape escapes s as one path segment.
func pathEscape(s string) string { return url.PathEscape(s) }

// round2 rounds x to two decimals for display.
func round2(x float64) float64 { return math.Round(x*100) / 100 }
