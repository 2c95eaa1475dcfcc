package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// TestProxyIsConfigOnly: list_targets shows an endpoint's proxy (host and
// port); an agent cannot name a proxy in http_request (an argument the
// schema does not have is refused); a proxy that is down fails the call
// with its address, and the session goes on.
func TestProxyIsConfigOnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	cfg := fmt.Sprintf("[http.api]\nbase_url = \"https://api.example/v1\"\nproxy = \"http://%s\"\n", down)
	client := mcp.NewClient(&mcp.Implementation{Name: "proxy-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: serverCmd(t, writeConfig(t, 0, cfg), stderr)}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()

	listed := func() {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			t.Fatalf("list_targets: %v %+v", err, res)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if want := fmt.Sprintf(`"proxy":%q`, down); !strings.Contains(string(raw), want) {
			t.Errorf("list_targets: got %s; want %s", raw, want)
		}
	}
	listed()

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "http_request", Arguments: map[string]any{
		"endpoint": "api", "method": "GET", "path": "/x", "proxy": "http://evil.example:3128"}})
	switch {
	case err != nil:
	case !res.IsError:
		t.Errorf("http_request with a proxy argument: got %+v; want it refused", res.Content)
	case !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"proxy"`):
		t.Errorf("http_request with a proxy argument: got %q; want the argument named", res.Content[0].(*mcp.TextContent).Text)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "http_request", Arguments: map[string]any{
		"endpoint": "api", "method": "GET", "path": "/x"}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || !strings.Contains(text, "failed") || !strings.Contains(text, "the proxy "+down) {
		t.Errorf("http_request through a proxy that is down: %q; want a failure naming the proxy %s", text, down)
	}
	listed() // the session goes on
}

// TestViaIsConfigOnly: list_targets shows the SSH target an endpoint
// goes through; an agent cannot name one in http_request.
func TestViaIsConfigOnly(t *testing.T) {
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	cfg := "[ssh.bastion]\nhost = \"127.0.0.1\"\nport = 1\nuser = \"u\"\nagent = true\njump_only = true\n" +
		"[http.api]\nbase_url = \"http://10.0.3.7:9090\"\nvia = \"bastion\"\n"
	client := mcp.NewClient(&mcp.Implementation{Name: "via-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: serverCmd(t, writeConfig(t, 0, cfg), stderr)}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_targets: %v %+v", err, res)
	}
	if raw, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(raw), `"via":"bastion"`) {
		t.Errorf("list_targets: got %s; want the endpoint's via", raw)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "http_request", Arguments: map[string]any{
		"endpoint": "api", "method": "GET", "path": "/x", "via": "other"}})
	if err == nil && (!res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, `"via"`)) {
		t.Errorf("http_request with a via argument: got %+v; want it refused, naming the argument", res.Content)
	}
}
