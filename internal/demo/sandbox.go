package demo

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"sync"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/secrets"
)

// Names in the sandbox's configuration.
const (
	// SSHTarget is the SSH target: this machine, as the current user.
	SSHTarget = "sandbox"
	// HTTPEndpoint is the loopback HTTP API.
	HTTPEndpoint = "demo-api"
	// KeySecret names the SSH client key in the in-memory secret store.
	KeySecret = "demo-ssh-key"
	// TokenSecret names the API's bearer token in the in-memory secret store.
	TokenSecret = "demo-api-token"
)

// retainBytes is how much of each stream the sandbox keeps for read_output
// and search_output: enough that the demo's 50 MB output can be read
// anywhere (a configured server keeps the first 1 MiB and the last 8 MiB).
const retainBytes = 64 << 20

// Sandbox is a running demo: the SSH server, the HTTP API, and the gateway
// configuration and credentials that reach them.
type Sandbox struct {
	// Config has SSH target SSHTarget and HTTP endpoint HTTPEndpoint, and a
	// state directory that Close removes.
	Config *config.Config
	// Secrets holds the SSH client key and the API token, in this process's
	// memory only.
	Secrets secrets.Memory

	ssh   *sshServer
	api   *apiServer
	store secrets.Memory
	state string

	closeOnce sync.Once
	closeErr  error
}

// Start starts the sandbox's servers on loopback ports with fresh keys and
// a fresh token. The caller must Close it.
func Start(ctx context.Context, logger *slog.Logger) (*Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("component", "demo")
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("demo: current user: %w", err)
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	clientPub, clientPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(clientPriv, "actiongw demo client")
	if err != nil {
		return nil, err
	}
	sshClientPub, err := ssh.NewPublicKey(clientPub)
	if err != nil {
		return nil, err
	}
	token := make([]byte, 32)
	rand.Read(token)
	store := secrets.Memory{
		KeySecret:   pem.EncodeToMemory(block),
		TokenSecret: []byte("demo_" + base64.RawURLEncoding.EncodeToString(token)),
	}

	state, err := os.MkdirTemp("", "actiongw-demo-")
	if err != nil {
		return nil, fmt.Errorf("demo: state directory: %w", err)
	}
	sb := &Sandbox{Secrets: store, store: store, state: state}
	if sb.ssh, err = startSSH(hostKey, u.Username, sshClientPub, logger); err != nil {
		sb.Close()
		return nil, err
	}
	if sb.api, err = startAPI(store[TokenSecret], logger); err != nil {
		sb.Close()
		return nil, err
	}

	cfg := config.Default()
	cfg.Server.StateDir = state
	cfg.Server.RetainHeadBytes = retainBytes
	cfg.SSH[SSHTarget] = &config.SSHTarget{
		Description: fmt.Sprintf("this machine, as %s, through a demo SSH server inside actiongw on 127.0.0.1 (commands run with /bin/sh -c)", u.Username),
		Host:        "127.0.0.1",
		Port:        sb.ssh.addr().Port,
		User:        u.Username,
		KeySecret:   KeySecret,
		HostKey:     ssh.FingerprintSHA256(hostKey.PublicKey()),
	}
	cfg.HTTP[HTTPEndpoint] = &config.HTTPEndpoint{
		Description: "demo API on 127.0.0.1: GET /echo returns the request's headers, GET /slow?lines=N streams N lines, " +
			`POST /deploy {"service":"…","version":"…"} pretends to deploy (a POST asks the person at the MCP client first)`,
		BaseURL: sb.api.url(),
		Methods: []string{"GET", "POST"},
		// A POST asks the person at the client first (MCP elicitation):
		// the demo shows one approved and one declined.
		ApproveMethods: []string{"POST"},
		Auth:           "bearer",
		TokenSecret:    TokenSecret,
		AllowPrivate:   true,
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		sb.Close()
		return nil, fmt.Errorf("demo: config: %w", err)
	}
	sb.Config = cfg
	logger.Info("demo sandbox started; its servers listen on loopback only and its credentials exist only in this process",
		"ssh", sb.ssh.addr().String(), "http", sb.api.url(), "user", u.Username)
	return sb, nil
}

// Close stops both servers (killing the commands still running), waits for
// their goroutines, forgets the credentials and removes the state
// directory.
func (sb *Sandbox) Close() error {
	sb.closeOnce.Do(func() {
		if sb.ssh != nil {
			sb.ssh.close()
		}
		if sb.api != nil {
			sb.api.close()
		}
		for _, v := range sb.store {
			clear(v)
		}
		if err := os.RemoveAll(sb.state); err != nil {
			sb.closeErr = fmt.Errorf("demo: removing the state directory: %w", err)
		}
	})
	return sb.closeErr
}
