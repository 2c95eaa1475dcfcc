package console

import (
	"crypto/rand"
	"crypto/subtle"
	"net/http"
	"sync"
)

// csrfHeader carries the session's CSRF token on every POST.
const csrfHeader = "X-Actiongw-Csrf"

// auth is the one session a console has: the login token opens it once.
type auth struct {
	token string // printed on the terminal; spent by the first login
	// cookie is the session cookie's name. Cookies do not tell ports
	// apart, so it names the console's.
	cookie string

	mu      sync.Mutex
	spent   bool
	session string // the cookie's value, "" before the login
	csrf    string
}

func newAuth(port string) *auth {
	return &auth{token: rand.Text(), cookie: "actiongw_console_" + port}
}

func equal(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// login spends the token: it sets the session cookie and sends the
// browser to the page, whose address carries no token. A second use is
// refused; a browser that has the session already is sent on.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	a := s.auth
	if c, err := r.Cookie(a.cookie); err == nil && a.valid(c.Value) {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	a.mu.Lock()
	ok := !a.spent && equal(r.URL.Query().Get("token"), a.token)
	if ok {
		a.spent = true
		a.session, a.csrf = rand.Text(), rand.Text()
	}
	session := a.session
	a.mu.Unlock()
	if !ok {
		s.log.Warn("console: a login with a wrong or spent token was refused", "remote", r.RemoteAddr)
		http.Error(w, "console: this login link is wrong or was used already; restart actiongw console for a new one", http.StatusUnauthorized)
		return
	}
	s.log.Info("console: logged in", "remote", r.RemoteAddr)
	http.SetCookie(w, &http.Cookie{
		Name: a.cookie, Value: session, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (a *auth) valid(session string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return equal(session, a.session)
}

func (a *auth) csrfToken() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.csrf
}

// require lets through a request with the session, and a POST only with
// the session's CSRF token too.
func (a *auth) require(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := false
		for _, c := range r.CookiesNamed(a.cookie) {
			ok = ok || a.valid(c.Value)
		}
		if !ok {
			http.Error(w, "console: not logged in: open the login URL the console printed on its terminal", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !equal(r.Header.Get(csrfHeader), a.csrfToken()) {
			http.Error(w, "console: missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
