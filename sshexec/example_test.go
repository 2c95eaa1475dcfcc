package sshexec_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/actiongw/actiongw/sshexec"
)

// A gateway keeps one Pool, takes credential bytes from the keyring, and
// turns a *HostKeyError into a tool error that tells the person how to
// trust the key.
func ExamplePool_Run() {
	pool := sshexec.NewPool(slog.New(slog.NewJSONHandler(os.Stderr, nil)))
	defer pool.Close()

	key := []byte("-----BEGIN OPENSSH PRIVATE KEY-----\n…") // from the keyring
	web1 := &sshexec.Target{
		Name: "web1", Host: "web1.example.com", User: "deploy",
		Auth:        sshexec.Auth{PrivateKey: key},
		MaxSessions: 10, // sshd's MaxSessions
		Keepalive:   15 * time.Second,
	}

	// MCP cancellation arrives as a cancelled context with a cause; the
	// context's deadline is the command's timeout.
	ctx, cancelTimeout := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(errors.New("request cancelled by the client"))

	var stdout, stderr discard // the gateway's capture writers
	res, err := pool.Run(ctx, web1, sshexec.Request{
		Command:     "journalctl -u nginx -n 100",
		OutputLimit: 64 << 20,
		Stdout:      &stdout,
		Stderr:      &stderr,
	})
	var hostKey *sshexec.HostKeyError
	switch {
	case errors.As(err, &hostKey):
		fmt.Println("tool error:", hostKey) // shows the fingerprint and how to trust it
	case err != nil && res == nil:
		fmt.Println("tool error:", err)
	default:
		fmt.Println(res.Status, res.ExitCode, res.RemoteStopped)
	}
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }
