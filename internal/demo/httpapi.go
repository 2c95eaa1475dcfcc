package demo

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Bounds of GET /slow.
const (
	slowDefaultLines = 20
	slowMaxLines     = 600
	slowInterval     = 100 * time.Millisecond
)

// apiServer is the sandbox's HTTP API. Every path needs the bearer token.
type apiServer struct {
	srv      *http.Server
	ln       net.Listener
	cancel   context.CancelFunc // ends the requests still running
	served   chan struct{}      // closed when Serve returns
	handlers sync.WaitGroup
}

// startAPI listens on a loopback port and serves the demo API to callers
// that present token.
func startAPI(token []byte, log *slog.Logger) (*apiServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo http api: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &apiServer{ln: ln, cancel: cancel, served: make(chan struct{})}
	a.srv = &http.Server{
		Handler:           a.track(authorized(token, apiMux())),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	go func() {
		defer close(a.served)
		a.srv.Serve(ln)
	}()
	return a, nil
}

// url is the API's base URL.
func (a *apiServer) url() string { return "http://" + a.ln.Addr().String() }

// close ends running requests, closes the server and waits for its
// handlers.
func (a *apiServer) close() {
	a.cancel()
	a.srv.Close()
	<-a.served
	a.handlers.Wait()
}

// track counts running handlers, so that close can wait for them.
func (a *apiServer) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.handlers.Add(1)
		defer a.handlers.Done()
		h.ServeHTTP(w, r)
	})
}

// authorized lets through requests that carry "Authorization: Bearer
// token", as a real API checks the credential actiongw injects.
func authorized(token []byte, h http.Handler) http.Handler {
	want := append([]byte("Bearer "), token...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="actiongw-demo"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func apiMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "actiongw demo API (loopback only)\n"+
			"GET /echo         your request line and headers, as this server received them\n"+
			"GET /slow?lines=N N lines, one every 100 ms (at most 600)\n"+
			"POST /deploy      a pretend deploy of the JSON body's service and version\n")
	})
	mux.HandleFunc("GET /echo", echo)
	mux.HandleFunc("GET /slow", slow)
	mux.HandleFunc("POST /deploy", deploy)
	return mux
}

// deployBodyBytes bounds the body of POST /deploy.
const deployBodyBytes = 4 << 10

// deploy pretends to deploy what its JSON body names: it answers 202 and
// changes nothing. It stands for a request that changes something, which
// the sandbox has the person at the MCP client approve first.
func deploy(w http.ResponseWriter, r *http.Request) {
	var d struct{ Service, Version string }
	// Not http.MaxBytesReader: over its limit the server closes the
	// connection, waiting half a second in a goroutine that close does
	// not wait for.
	err := json.NewDecoder(io.LimitReader(r.Body, deployBodyBytes)).Decode(&d)
	if err != nil || d.Service == "" || d.Version == "" {
		http.Error(w, `the body must be JSON {"service":"…","version":"…"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusAccepted)
	fmt.Fprintf(w, "deploy of %s %s accepted (a demo: nothing changes)\n", d.Service, d.Version)
}

// echo returns the request line and headers as received: the credential
// actiongw injected comes back, and actiongw must redact it.
func echo(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "%s %s %s\n", r.Method, r.URL.RequestURI(), r.Proto)
	fmt.Fprintf(w, "Host: %s\n", r.Host)
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		for _, v := range r.Header[name] {
			fmt.Fprintf(w, "%s: %s\n", name, v)
		}
	}
}

// slow streams numbered lines, one every slowInterval, flushing each.
func slow(w http.ResponseWriter, r *http.Request) {
	n := slowDefaultLines
	if s := r.URL.Query().Get("lines"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > slowMaxLines {
			http.Error(w, fmt.Sprintf("lines must be 1-%d", slowMaxLines), http.StatusBadRequest)
			return
		}
		n = v
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	rc := http.NewResponseController(w)
	tick := time.NewTicker(slowInterval)
	defer tick.Stop()
	for i := 1; i <= n; i++ {
		fmt.Fprintf(w, "line %d of %d\n", i, n)
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		if i == n {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}
