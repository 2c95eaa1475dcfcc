package gateway

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/tlstest"
	"github.com/actiongw/actiongw/secrets"
)

// TestHTTPMutualTLS runs http_request against a server that requires a
// client certificate its CA signed, with the key in the keyring: the
// endpoint with the certificate gets in; one on the same server without
// it is refused by the server with what to set; a wrong or missing key
// fails only its own endpoint, before any dial. Hostile: the server
// sends the private key back, and no result, audit record or log line
// holds it.
func TestHTTPMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	certPEM, keyPEM := ca.Client(t, "agent")
	_, otherKey := ca.Client(t, "other")
	srv := ca.Server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/leak" {
			w.Write(keyPEM) // a server that holds the key, or a proxy that saw it
			return
		}
		fmt.Fprintf(w, "client=%s", r.TLS.PeerCertificates[0].Subject.CommonName)
	}), tlstest.ServerOptions{ClientAuth: tls.RequireAndVerifyClientCert})

	dir := t.TempDir()
	caFile, certFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem")
	for path, data := range map[string][]byte{caFile: ca.PEM(), certFile: certPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	endpoint := func(name, keys string) string {
		return fmt.Sprintf("[http.%s]\nbase_url = %q\nallow_private = true\nca_file = %q\n%s\n", name, srv.URL, caFile, keys)
	}
	withKey := func(secret string) string {
		return fmt.Sprintf("client_cert = %q\nclient_key_secret = %q\n", certFile, secret)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\nstate_dir = %q\n", t.TempDir()) +
		endpoint("mtls", withKey("client-key")) + endpoint("nocert", "") +
		endpoint("wrongkey", withKey("other-key")) + endpoint("nokey", withKey("missing-key"))))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"client-key": keyPEM, "other-key": otherKey}
	logs := &syncbuf.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	gw := New(context.Background(), Options{Config: cfg, Secrets: store, Logger: logger})
	t.Cleanup(func() { gw.Close() })

	ctx := context.Background()
	var seen strings.Builder // every result, for the leak check
	tests := []struct {
		endpoint, path string
		isError        bool
		want           []string // in the text, or the body when ok
	}{
		{"mtls", "/", false, []string{"client=agent"}},
		{"mtls", "/leak", false, []string{"[REDACTED:client-key]"}},
		{"nocert", "/", true, []string{"tls: certificate required", `set client_cert = "PATH" and client_key_secret = "NAME" in [http.nocert]`}},
		{"wrongkey", "/", true, []string{`endpoint "wrongkey": client_key_secret:`, certFile, `keyring item "other-key"`, "are not a pair"}},
		{"nokey", "/", true, []string{`"missing-key"`, "actiongw secret set missing-key"}},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint+tt.path, func(t *testing.T) {
			r := gw.HTTPRequest(ctx, HTTPRequestInput{Endpoint: tt.endpoint, Method: "GET", Path: tt.path}, nil)
			s := structured(t, r) + r.Text
			seen.WriteString(s)
			if r.IsError != tt.isError {
				t.Fatalf("isError %v; want %v: %s", r.IsError, tt.isError, s)
			}
			got := r.Text
			if out, ok := r.Structured.(*HTTPRequestOutput); ok && !tt.isError {
				got = out.Body.Head
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got %q; want it to contain %q", got, w)
				}
			}
		})
	}

	// check reports the wrong key and the missing one without a dial, and
	// the good endpoint as connected.
	for _, c := range CheckTargets(ctx, cfg, store, logger, 30*time.Second) {
		seen.WriteString(fmt.Sprint(c.Err))
		wantOK := c.Name == "mtls" || c.Name == "nocert" // nocert's handshake completes; its request would fail
		if (c.Err == nil) != wantOK {
			t.Errorf("check %s: %v; want success %v", c.Name, c.Err, wantOK)
		}
	}

	all := seen.String() + readAudit(t, &fixture{cfg: cfg}) + logs.String()
	for _, line := range strings.Split(strings.TrimSpace(string(keyPEM)), "\n")[1:] {
		if len(line) >= 16 && strings.Contains(all, line) {
			t.Fatalf("a line of the private key leaked into a result, the audit log or the logs: %s", line)
		}
	}
}
