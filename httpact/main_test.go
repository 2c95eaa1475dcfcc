package httpact

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// lockedBuffer collects log output from concurrent requests.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// newTestClient returns a Client that logs at debug level into the
// returned buffer and refuses, as a test failure, to dial anything but
// loopback: a broken guard must not send traffic off this machine.
func newTestClient(t testing.TB) (*Client, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	c := NewClient(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	dial := c.dial
	c.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		ap, err := netip.ParseAddrPort(addr)
		if err != nil || !ap.Addr().IsLoopback() {
			t.Errorf("dial %q: only loopback addresses may be dialled in tests", addr)
			return nil, errors.New("test: non-loopback dial refused")
		}
		return dial(ctx, network, addr)
	}
	t.Cleanup(c.Close)
	return c, logs
}
