package mcpserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

// bigTool adds a tool whose result is larger than any pipe buffer, so a
// host that does not read leaves the writer stuck.
func bigTool(s *mcp.Server, _ *toolEnv) {
	type in struct{}
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		return textResult("%s", strings.Repeat("x", 4<<20)), nil, nil
	})
}

func init() { toolSets = append(toolSets, bigTool) }

const initFrames = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}
`

// watchedFile is a pipe whose writes announce themselves: a write larger
// than the pipe holds, to a pipe nobody reads, is stuck once it has begun.
type watchedFile struct {
	*os.File // for SetWriteDeadline, which Serve uses to interrupt a write
	bigWrite chan struct{}
	once     sync.Once
}

func (f *watchedFile) Write(p []byte) (int, error) {
	if len(p) > 1<<20 {
		f.once.Do(func() { close(f.bigWrite) })
	}
	return f.File.Write(p)
}

// startServe runs Serve in process over real pipes. Its stdout closes
// bigWrite when a write of more than 1 MiB begins.
func startServe(t *testing.T, ctx context.Context) (hostIn *os.File, hostOut *bufio.Reader, bigWrite <-chan struct{}, done chan error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	out := &watchedFile{File: outW, bigWrite: make(chan struct{})}
	done = make(chan error, 1)
	go func() {
		done <- Serve(ctx, inR, out, Options{Config: config.Default(), Version: "test"})
	}()
	t.Cleanup(func() {
		inW.Close()
		outR.Close()
		inR.Close()
		outW.Close()
	})
	if _, err := inW.WriteString(initFrames); err != nil {
		t.Fatal(err)
	}
	return inW, bufio.NewReader(outR), out.bigWrite, done
}

func waitServe(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
		return nil
	}
}

func TestServeEndsAtEOF(t *testing.T) {
	defer goleak.VerifyNone(t)
	hostIn, hostOut, _, done := startServe(t, context.Background())
	if line, err := hostOut.ReadString('\n'); err != nil || !strings.Contains(line, `"id":1`) {
		t.Fatalf("initialize: got %q, %v", line, err)
	}
	if _, err := hostIn.WriteString(`{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := hostOut.ReadString('\n'); err != nil || line != `{"jsonrpc":"2.0","id":2,"result":{}}`+"\n" {
		t.Fatalf("ping: got %q, %v", line, err)
	}
	hostIn.Close()
	if err := waitServe(t, done); err != nil {
		t.Errorf("Serve at EOF: got %v; want nil", err)
	}
}

// TestServeCancelWhileBlocked: with stdout stuck (nobody reads it) and stdin
// still open, cancelling the context ends Serve and all its goroutines.
func TestServeCancelWhileBlocked(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	hostIn, _, bigWrite, done := startServe(t, ctx)
	if _, err := hostIn.WriteString(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}` + "\n"); err != nil {
		t.Fatal(err)
	}
	// The 4 MiB answer cannot fit the pipe: once its write has begun, it
	// is stuck until Serve interrupts it.
	select {
	case <-bigWrite:
	case <-time.After(time.Minute):
		t.Fatal("the big answer was never written")
	}
	stop := errors.New("test stop")
	cancel(stop)
	if err := waitServe(t, done); !errors.Is(err, stop) {
		t.Errorf("Serve after cancel: got %v; want the cause %v", err, stop)
	}
}

// TestServeCancelWithPlainStdin: a stream without deadlines (like a
// blocking stdin) cannot be interrupted, yet Serve returns at cancellation;
// its reader ends as soon as the stream does.
func TestServeCancelWithPlainStdin(t *testing.T) {
	defer goleak.VerifyNone(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go io.Copy(io.Discard, outR)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, inR, outW, Options{}) }()
	if _, err := io.WriteString(inW, initFrames); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := waitServe(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("Serve after cancel: got %v; want context.Canceled", err)
	}
	inW.Close()
	outW.Close()
}
