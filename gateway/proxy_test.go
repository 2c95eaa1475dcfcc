package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/proxytest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
	"github.com/actiongw/actiongw/secrets"
)

// TestHTTPThroughProxy runs http_request on endpoints behind Debian's
// tinyproxy: the token from the keyring reaches the API, tinyproxy reads
// only CONNECT host:port, and neither the results, the audit log nor the
// logs hold it; an endpoint whose proxy is down fails with the proxy's
// address, and the next call works; check reports the proxy.
func TestHTTPThroughProxy(t *testing.T) {
	p := proxytest.StartTinyproxy(t)
	ca := tlstest.NewCA(t, "test CA")
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "auth=%s", r.Header.Get("Authorization"))
	}), tlstest.ServerOptions{})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, ca.PEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downAddr := down.Addr().String()
	down.Close()

	const token = "proxy-test-token-5d0c"
	endpoint := func(name, proxy string) string {
		return fmt.Sprintf("[http.%s]\nbase_url = %q\nallow_private = true\nca_file = %q\nauth = \"bearer\"\ntoken_secret = \"tok\"\nproxy = \"http://%s\"\n",
			name, srv.URL+"/api", caFile, proxy)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nstate_dir = %q\n", t.TempDir()) +
		endpoint("api", p.Addr) + endpoint("down", downAddr)))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"tok": []byte(token)}
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw := New(context.Background(), Options{Config: cfg, Secrets: store, Logger: logger})
	t.Cleanup(func() { gw.Close() })
	ctx := context.Background()

	var seen strings.Builder
	call := func(endpoint string) *HTTPRequestOutput {
		t.Helper()
		r := gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: endpoint, Method: "GET", Path: "/x"}, nil)
		seen.WriteString(structured(t, r) + r.Text)
		out, ok := r.Structured.(*HTTPRequestOutput)
		if !ok {
			t.Fatalf("http_request %s: %s", endpoint, r.Text)
		}
		return out
	}
	if out := call("api"); out.Status != StatusOK || out.Body.Head != "auth=Bearer [REDACTED:tok]" {
		t.Errorf("api: %s %q %s; want ok with the credential (redacted)", out.Status, out.Body.Head, out.Reason)
	}
	out := call("down")
	if want := "the proxy " + downAddr + ": "; out.Status != StatusFailed || !strings.Contains(out.Reason, want) {
		t.Errorf("down: %s %q; want failed with %q", out.Status, out.Reason, want)
	}
	if out := call("api"); out.Status != StatusOK {
		t.Errorf("api after down: %s %s; want ok", out.Status, out.Reason)
	}

	for _, c := range CheckTargets(ctx, cfg, store, logger, 30*time.Second) {
		seen.WriteString(fmt.Sprint(c.Err))
		want := "through the proxy " + p.Addr + " (CONNECT)"
		switch {
		case c.Name == "api" && (c.Err != nil || !strings.Contains(c.Detail, want)):
			t.Errorf("check api: %q, %v; want %q", c.Detail, c.Err, want)
		case c.Name == "down" && (c.Err == nil || !strings.Contains(c.Err.Error(), downAddr)):
			t.Errorf("check down: %v; want an error naming the proxy %s", c.Err, downAddr)
		}
	}

	hostport := srv.Listener.Addr().String()
	p.WaitRequest(t, "CONNECT "+hostport)
	for _, l := range p.Requests() {
		if !strings.HasPrefix(l, "CONNECT "+hostport+" ") {
			t.Errorf("tinyproxy read %q; want only CONNECT %s", l, hostport)
		}
	}
	if all := p.Sent() + seen.String() + readAudit(t, &fixture{cfg: cfg}) + logs.String(); strings.Contains(all, token) {
		t.Errorf("the token reached the proxy, a result, the audit log or the logs")
	}
}
