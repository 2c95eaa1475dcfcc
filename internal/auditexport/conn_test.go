package auditexport

import (
	"context"
	"testing"
	"time"
)

// TestCloseWriteGivesUp: into a receiver that stopped reading, with the
// sockets' buffers full, a TLS close_notify blocks for 5 s of TLS's own.
// closeWrite ends with its ctx instead, by closing the socket, which the
// reader sees; so Close keeps its deadline.
func TestCloseWriteGivesUp(t *testing.T) {
	r := startReceiver(t, receiverOptions{stall: true, tls: true})
	c, err := dial(context.Background(), r.addr(), r.client)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	// A write that ends with its ctx found the buffers full (one that
	// was only slow leaves them fuller; the test holds either way).
	chunk := make([]byte, 256<<10)
	for full := false; !full; {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		full = c.write(ctx, chunk) != nil
		cancel()
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = c.closeWrite(ctx)
	t.Logf("closeWrite: %v", err)
	select {
	case <-c.dead:
	case <-time.After(time.Minute):
		t.Fatalf("the socket is still open a minute after closeWrite's ctx ended")
	}
}
