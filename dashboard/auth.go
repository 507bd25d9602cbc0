package dashboard

import (
	"net/http"
)

// maxLoginBody bounds the login form.
const maxLoginBody = 8 << 10

// loginView is the login page's data.
type loginView struct {
	Next  string
	Error string
	// NoToken: the server has no token; there is nothing to log in to.
	NoToken bool
}

// loginPage serves GET /login.
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, http.StatusOK, "login", &loginView{Next: safeNext(r.URL.Query().Get("next")), NoToken: !d.access.TokenRequired()})
}

// login serves POST /login: a form with the token. A right token sets the
// session cookie and goes on to the page asked for; a wrong one answers
// 401 with the form again and no hint of what was wrong.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if !d.access.OriginAllowed(r) {
		d.render(w, r, http.StatusForbidden, "error", &errorView{Title: "Cross-origin request refused",
			Details: "The login form must be sent from this server's own pages."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		d.render(w, r, http.StatusBadRequest, "login", &loginView{Error: "The form could not be read."})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if !d.access.TokenRequired() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if !d.access.TokenMatches(r.PostForm.Get("token")) {
		d.render(w, r, http.StatusUnauthorized, "login", &loginView{Next: next, Error: "Wrong token."})
		return
	}
	http.SetCookie(w, d.access.SessionCookie(d.secureCookie(r)))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout serves POST /logout: it deletes the session cookie.
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	if !d.access.OriginAllowed(r) {
		d.render(w, r, http.StatusForbidden, "error", &errorView{Title: "Cross-origin request refused",
			Details: "Log out from this server's own pages."})
		return
	}
	http.SetCookie(w, d.access.ClearSessionCookie(d.secureCookie(r)))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}
