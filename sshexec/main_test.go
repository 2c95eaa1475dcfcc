package sshexec

import (
	"context"
	"encoding/pem"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"go.uber.org/goleak"
)

// No goroutine may outlive the tests, and no process they started (a
// remote command, an agent) may outlive the suite.
func TestMain(m *testing.M) {
	testenv.Main(m, func() error { return goleak.Find() })
}

// target returns a target that logs in to s as the unprivileged test user.
func target(s *sshtest.Server) *Target {
	return &Target{
		Name:           "test",
		Host:           s.Host,
		Port:           s.Port,
		User:           s.User,
		KnownHostsPath: s.KnownHosts,
		Auth:           Auth{PrivateKey: s.ClientKey},
		MaxSessions:    10,
		Keepalive:      15 * time.Second,
	}
}

// newPool returns a pool closed at cleanup, after which no goroutine of it
// may be left.
func newPool(t *testing.T) *Pool {
	t.Helper()
	p := NewPool(testLogger())
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close pool: %v", err)
		}
		goleak.VerifyNone(t, goleak.IgnoreCurrent())
	})
	return p
}

// output is what a command wrote, with its result.
type output struct {
	res            *Result
	stdout, stderr string
}

// runCmd runs command on tg with a 30s safety timeout.
func runCmd(t *testing.T, p *Pool, tg *Target, command string) (output, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	res, err := p.Run(ctx, tg, Request{Command: command, Stdout: &stdout, Stderr: &stderr})
	return output{res, stdout.String(), stderr.String()}, err
}

func testLogger() *slog.Logger {
	if os.Getenv("SSHEXEC_DEBUG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func pemEncode(b *pem.Block) []byte { return pem.EncodeToMemory(b) }
