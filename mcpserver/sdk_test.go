package mcpserver_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

const targetsTOML = `
[ssh.web1]
description = "production web server"
host = "127.0.0.1"
port = 2222
user = "deploy"
agent = true

[http.api]
description = "internal API"
base_url = "http://127.0.0.1:8080/v1"
methods = ["GET", "POST"]
allow_private = true
`

// TestSDKClient drives the real binary with the go-sdk's own client over
// its CommandTransport: initialize, tools/list and calls.
func TestSDKClient(t *testing.T) {
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	cmd := serverCmd(t, writeConfig(t, 0, targetsTOML), stderr)
	client := mcp.NewClient(&mcp.Implementation{Name: "sdk-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer func() {
		if err := cs.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	}()
	if got := cs.InitializeResult().ServerInfo.Name; got != "actiongw" {
		t.Errorf("got server name %q; want actiongw", got)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.OutputSchema == nil {
			t.Errorf("tool %s has no outputSchema", tool.Name)
		}
	}
	for _, want := range []string{"list_targets", "health", "emit"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list: got %v; want %s among them", names, want)
		}
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("list_targets: got %+v; want a result with a text block", res)
	}
	var got struct {
		SSH  []map[string]any `json:"ssh"`
		HTTP []map[string]any `json:"http"`
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	wantSSH := map[string]any{"name": "web1", "description": "production web server", "user": "deploy", "host": "127.0.0.1"}
	wantHTTP := map[string]any{"name": "api", "description": "internal API", "base_url": "http://127.0.0.1:8080/v1", "methods": []any{"GET", "POST"}}
	if len(got.SSH) != 1 || !jsonEqual(got.SSH[0], wantSSH) || len(got.HTTP) != 1 || !jsonEqual(got.HTTP[0], wantHTTP) {
		t.Errorf("list_targets: got %s; want ssh %v and http %v", raw, wantSSH, wantHTTP)
	}

	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "health", Arguments: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
