package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/feed"
)

// Watcher is what the console needs of a feed.Watcher: what every serve
// does, and a way to stop an action and answer a question.
type Watcher interface {
	Events() <-chan feed.Event
	Snapshot() feed.Snapshot
	Stop(ctx context.Context, serve, handle string) (feed.StopResult, error)
	Answer(ctx context.Context, serve, question string, a feed.Answer) error
}

// DefaultListen is the listen address when none is given: loopback, and
// a free port.
const DefaultListen = "127.0.0.1:0"

// Options configure Listen.
type Options struct {
	// Listen is the address to serve on: an IP address on loopback and a
	// port; "" is DefaultListen. Any other address is refused with a
	// *NotLoopbackError.
	Listen string
	// StateDir is the state directory whose audit log the audit view
	// reads.
	StateDir string
	// Watcher follows the serves on StateDir.
	Watcher Watcher
	// VerifyOptions gives the key and checkpoint to verify the audit log
	// with, and a note saying what it could not read; nil verifies the
	// chain without them.
	VerifyOptions func(ctx context.Context) (audit.VerifyOptions, string)
	// Logger receives what goes wrong; nil discards it.
	Logger *slog.Logger
}

// NotLoopbackError refuses a listen address that is not on loopback.
type NotLoopbackError struct{ Addr string }

func (e *NotLoopbackError) Error() string {
	return fmt.Sprintf("console: %q is not a loopback address: the console serves this machine only (use 127.0.0.1:PORT or [::1]:PORT)", e.Addr)
}

//go:embed assets
var assets embed.FS

// Server is a console listening on loopback.
type Server struct {
	opts   Options
	log    *slog.Logger
	ln     net.Listener
	addr   string // host:port, as the Host header must read
	origin string // http://addr
	auth   *auth
	hub    *hub
	static http.Handler

	// writeTimeout bounds each write to an event stream: a tab that
	// stops reading is dropped after it.
	writeTimeout time.Duration
}

// Listen checks opts and listens on their loopback address.
func Listen(opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	host, _, err := net.SplitHostPort(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("console: listen address %q: %w", opts.Listen, err)
	}
	// A name is refused too: what it resolves to is not ours to trust,
	// and the Host a browser sends must be the address itself.
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() || ip.Zone() != "" {
		return nil, &NotLoopbackError{Addr: opts.Listen}
	}
	if opts.Watcher == nil {
		return nil, errors.New("console: no watcher")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	sub, _ := fs.Sub(assets, "assets")
	s := &Server{
		opts: opts, log: log, ln: ln, addr: addr.String(), auth: newAuth(strconv.Itoa(addr.Port)),
		hub: newHub(), static: http.FileServerFS(sub), writeTimeout: 10 * time.Second,
	}
	s.origin = "http://" + s.addr
	return s, nil
}

// Addr is the address the console listens on.
func (s *Server) Addr() string { return s.addr }

// Page is the address of the console's page. It carries no credential:
// opening it needs the session. Serves hand their clients a question's
// place on it (feed.Watcher.SetPage).
func (s *Server) Page() string { return s.origin + "/" }

// LoginURL is the URL that logs in, once: it carries the one-time token.
// It is for the person's terminal only.
func (s *Server) LoginURL() string { return s.origin + "/login?token=" + s.auth.token }

// Serve serves until ctx ends, then closes the listener and the event
// streams, and returns once every goroutine it started has stopped.
func (s *Server) Serve(ctx context.Context) error {
	srv := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	var wg sync.WaitGroup
	hubCtx, stopHub := context.WithCancel(ctx)
	wg.Go(func() { s.hub.run(hubCtx, s.opts.Watcher.Events()) })
	wg.Go(func() {
		<-ctx.Done()
		// Event streams end with the hub; the rest get a moment.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	})
	err := srv.Serve(s.ln)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	stopHub()
	wg.Wait()
	return err
}

// handler is every route behind the checks every request passes.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", s.login)
	private := http.NewServeMux()
	private.HandleFunc("GET /api/session", s.session)
	private.HandleFunc("GET /api/events", s.events)
	private.HandleFunc("POST /api/stop", s.stop)
	private.HandleFunc("POST /api/answer", s.answer)
	private.HandleFunc("GET /api/audit", s.auditView)
	private.HandleFunc("GET /api/audit.jsonl", s.auditDownload)
	private.HandleFunc("GET /api/verify", s.verify)
	private.Handle("GET /", s.static)
	mux.Handle("/", s.auth.require(private))
	return s.guard(mux)
}

// contentSecurityPolicy allows the page's own script, styles and images,
// and nothing else: no inline script, no other origin, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"font-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// guard sets the headers every response carries and refuses a request
// from anywhere but the console's own page: a Host other than the listen
// address (DNS rebinding), a foreign Origin, or a fetch a browser says
// came from another site.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		if r.Host != s.addr {
			http.Error(w, "console: wrong Host: open the address the console printed", http.StatusForbidden)
			return
		}
		if o, ok := r.Header["Origin"]; ok && (len(o) != 1 || o[0] != s.origin) {
			http.Error(w, "console: foreign Origin", http.StatusForbidden)
			return
		}
		// Cookies do not tell ports apart: another server on loopback
		// is the same site. Its requests say so.
		switch r.Header.Get("Sec-Fetch-Site") {
		case "", "same-origin", "none":
		default:
			http.Error(w, "console: request from another site", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
