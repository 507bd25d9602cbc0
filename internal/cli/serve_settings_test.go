package cli

import (
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestServeBadHostBeforeStart: a malformed --allowed-host is refused before
// serve opens the store or starts the runtime.
func TestServeBadHostBeforeStart(t *testing.T) {
	t.Parallel()
	db, path := tempDB(t)
	r := runCLI(t, "serve", "--demo", "--addr", "127.0.0.1:0", "--allowed-host", "not a host!", "--db", db)
	r.wantErr(t, 1, "checking the settings", "not a host name or address")
	if r.stdout != "" {
		t.Fatalf("serve printed before refusing its settings:\n%s", r.stdout)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("serve opened the store before refusing its settings (stat: %v)", err)
	}
}

func TestServeURLs(t *testing.T) {
	t.Parallel()
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	for _, tc := range []struct {
		name         string
		addr         net.Addr
		hosts        []string
		token        bool
		base, dash   string
		warnContains string
	}{
		{"loopback", tcp("127.0.0.1", 8080), nil, false, "http://127.0.0.1:8080",
			"dashboard: http://127.0.0.1:8080/", "every local program and user of this machine"},
		{"wildcard IPv6", tcp("::", 8080), []string{"api.example.com"}, true, "http://127.0.0.1:8080",
			"dashboard: http://127.0.0.1:8080/ on this machine, http://api.example.com:8080/ from the network (log in with the --auth-token)", ""},
		{"wildcard IPv4, insecure", tcp("0.0.0.0", 9000), []string{"a.example", "[2001:db8::1]"}, false, "http://127.0.0.1:9000",
			"dashboard: http://127.0.0.1:9000/ on this machine, http://a.example:9000/ or http://[2001:db8::1]:9000/ from the network",
			"anyone who can reach on every interface of this machine over the network"},
		{"one address, any host", tcp("192.0.2.7", 80), []string{"*"}, false, "http://192.0.2.7:80",
			"dashboard: http://ADDRESS-OF-THIS-MACHINE:80/", "anyone who can reach on 192.0.2.7:80 over the network"},
	} {
		u := serveURLs(tc.addr, tc.hosts)
		if u.base != tc.base {
			t.Errorf("%s: base %q, want %q", tc.name, u.base, tc.base)
		}
		if got := u.dashboardLine(tc.token); got != tc.dash {
			t.Errorf("%s: dashboard line\n got %q\nwant %q", tc.name, got, tc.dash)
		}
		if w := u.openWarning(); tc.warnContains != "" && !strings.Contains(w, tc.warnContains) {
			t.Errorf("%s: warning %q does not say %q", tc.name, w, tc.warnContains)
		}
		if w := u.openWarning(); !u.loopback && strings.Contains(w, "local program") {
			t.Errorf("%s: a network listener warns about local programs: %q", tc.name, w)
		}
	}
}

// TestServeInsecureAllInterfaces: on every interface without a token, serve
// says the API is open to the network, and its dashboard URL is one the
// Host check accepts.
func TestServeInsecureAllInterfaces(t *testing.T) {
	t.Parallel()
	db, _ := tempDB(t)
	s := serve(t, "--db", db, "--addr", ":0", "--insecure", "--allowed-host", "api.example.com")
	dash := s.stdout.waitLine(t, "dashboard: ", s.exited)
	local, _, ok := strings.Cut(dash, " on this machine, ")
	if !ok || !strings.HasPrefix(local, "http://127.0.0.1:") || !strings.Contains(dash, "http://api.example.com:") {
		t.Fatalf("dashboard line %q: want a loopback URL and the allowed host's", dash)
	}
	if code, _, body := request(t, "GET", strings.TrimSuffix(local, "/"), "/", "", nil, ""); code != http.StatusOK {
		t.Fatalf("GET the printed dashboard URL %s: %d %s", local, code, body)
	}
	warn := s.stdout.waitLine(t, "no --auth-token", s.exited)
	if !strings.Contains(warn, "over the network") || strings.Contains(warn, "local program") {
		t.Fatalf("warning %q: want it to say the network", warn)
	}
}
