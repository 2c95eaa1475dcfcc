package mcphost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	case "elicit":
		if err := elicitingServer(); err != nil {
			fmt.Fprintln(os.Stderr, "elicit:", err)
			os.Exit(1)
		}
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

// elicitingServer is a server that asks its host two questions: the
// first it waits for the answer to, the second it withdraws. It fails
// unless the host declared form elicitation, answered the first with
// accept, and never answered the second.
func elicitingServer() error {
	in := bufio.NewScanner(os.Stdin)
	next := func() (map[string]any, error) {
		if !in.Scan() {
			return nil, fmt.Errorf("stdin ended: %v", in.Err())
		}
		var m map[string]any
		return m, json.Unmarshal(in.Bytes(), &m)
	}
	init, err := next()
	if err != nil {
		return err
	}
	caps, _ := init["params"].(map[string]any)["capabilities"].(map[string]any)
	if form, _ := caps["elicitation"].(map[string]any)["form"]; form == nil {
		return fmt.Errorf("initialize declared no form elicitation: %v", caps)
	}
	fmt.Printf(`{"jsonrpc":"2.0","id":%v,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"fake","version":"1"}}}`+"\n", init["id"])
	if _, err := next(); err != nil { // notifications/initialized
		return err
	}
	ask := `{"jsonrpc":"2.0","id":%s,"method":"elicitation/create","params":{"mode":"form","message":"%s","requestedSchema":{"type":"object","properties":{}}}}` + "\n"
	fmt.Printf(ask, `"q1"`, "first")
	answer, err := next()
	if err != nil {
		return err
	}
	if answer["id"] != "q1" || answer["result"].(map[string]any)["action"] != "accept" {
		return fmt.Errorf("the first answer: %v", answer)
	}
	// A number id that prints as 1e+06 once decoded into a float64.
	fmt.Printf(ask, "1000000", "second")
	fmt.Println(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1000000,"reason":"withdrawn"}}`)
	// The host closes stdin when its Close runs; nothing may come before.
	if m, err := next(); err == nil {
		return fmt.Errorf("after the second question was withdrawn the host sent %v", m)
	}
	return nil
}

// TestOnElicit: the host declares elicitation, answers a question through
// OnElicit, and ends the context of one the server withdraws, sending no
// answer to it; neither is outstanding then. Close waits for the
// goroutines (goleak checks it).
func TestOnElicit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	withdrawn := make(chan string, 1)
	c, err := mcphost.Start(ctx, helper("elicit"), mcphost.Options{OnElicit: func(qctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
		if p.Message == "first" {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
		}
		select {
		case <-qctx.Done():
			withdrawn <- p.Message
		case <-ctx.Done():
		}
		return &mcp.ElicitResult{Action: "accept"}, nil // must not be sent
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-withdrawn:
		if got != "second" {
			t.Errorf("withdrawn: %q; want the second question", got)
		}
	case <-ctx.Done():
		t.Fatal("the withdrawn question's context never ended")
	}
	if got := c.Outstanding(); len(got) != 0 {
		t.Errorf("outstanding after one question answered and one withdrawn: %q; want none", got)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v; want the server's clean exit (it checks the answers)", err)
	}
}
