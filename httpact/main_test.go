package httpact

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"testing"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newTestClient returns a Client that logs at debug level into the
// returned buffer and refuses, as a test failure, to dial anything but
// loopback: a broken guard must not send traffic off this machine.
func newTestClient(t testing.TB) (*Client, *syncbuf.Buffer) {
	t.Helper()
	logs := &syncbuf.Buffer{}
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
