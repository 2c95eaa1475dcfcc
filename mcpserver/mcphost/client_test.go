package mcphost_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/testenv"
	"github.com/actiongw/actiongw/mcpserver"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// The test binary doubles as the server process, in the mode named by
// this variable.
const modeEnv = "MCPHOST_TEST_SERVER"

func TestMain(m *testing.M) {
	switch os.Getenv(modeEnv) {
	case "":
		testenv.Main(m, func() error { return goleak.Find() })
	case "serve":
		if err := mcpserver.Serve(context.Background(), os.Stdin, os.Stdout, mcpserver.Options{Version: "helper"}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	case "hang": // ignores its stdin closing
		time.Sleep(time.Minute)
	case "oversize": // one line over the host's limit, then a pong for id 1
		fmt.Println(`{"jsonrpc":"2.0","method":"x","params":{"pad":"` + strings.Repeat("y", 4096) + `"}}`)
		fmt.Println(`{"jsonrpc":"2.0","id":1,"result":{}}`)
		time.Sleep(time.Minute)
	}
	os.Exit(0)
}

func helper(mode string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), modeEnv+"="+mode)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestClientSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcphost.Start(ctx, helper("serve"), mcphost.Options{})
	if err != nil {
		t.Fatal(err)
	}
	init, err := c.Initialize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if init.ServerInfo.Version != "helper" {
		t.Errorf("got server version %q; want helper", init.ServerInfo.Version)
	}
	res, err := c.CallTool(ctx, "list_targets", map[string]any{}, nil)
	if err != nil || res.IsError {
		t.Fatalf("list_targets: %v %+v", err, res)
	}
	if _, err := c.CallTool(ctx, "no_such_tool", map[string]any{}, nil); err == nil {
		t.Error("calling an unknown tool: got no error")
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: got %v; want a clean exit", err)
	}
	m := c.Metrics()
	if m.FramesOut != 4 || m.FramesIn != 3 || m.ParseErrors != 0 {
		t.Errorf("got frames_out %d, frames_in %d, parse_errors %d; want 4, 3, 0", m.FramesOut, m.FramesIn, m.ParseErrors)
	}
	if _, err := c.Send(ctx, "ping", nil); !errors.Is(err, mcphost.ErrClosed) {
		t.Errorf("Send after Close: got %v; want ErrClosed", err)
	}
}

func TestCloseKillsAServerThatStays(t *testing.T) {
	ctx := context.Background()
	c, err := mcphost.Start(ctx, helper("hang"), mcphost.Options{CloseTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Send(ctx, "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	// CloseTimeout ends Close: a hang is the failure.
	testenv.Returns(t, time.Minute, "Close of a server that stays", func() { err = c.Close() })
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Errorf("Close: got %v; want the killed server's exit error", err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, mcphost.ErrClosed) {
		t.Errorf("pending call: got %v; want ErrClosed", err)
	}
}

func TestHostWireLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := mcphost.Start(ctx, helper("oversize"), mcphost.Options{MaxFrameBytes: 1024, CloseTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Call(ctx, "ping", nil); err != nil {
		t.Fatalf("the frame after an oversize one: %v", err)
	}
	if m := c.Metrics(); m.OversizeFrames != 1 || m.LargestFrameIn > 1024 {
		t.Errorf("got oversize_frames %d, largest_frame_in %d; want 1 and at most 1024", m.OversizeFrames, m.LargestFrameIn)
	}
}
