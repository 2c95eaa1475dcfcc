package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// TestListTargetsLeavesOutJumpOnly: list_targets shows the targets an
// agent may name; a jump_only bastion is none of them.
func TestListTargetsLeavesOutJumpOnly(t *testing.T) {
	ctx := testContext(t)
	stderr := &syncbuf.Buffer{}
	cfg := "[ssh.bastion]\nhost = \"127.0.0.1\"\nuser = \"u\"\nagent = true\njump_only = true\n" +
		"[ssh.web]\nhost = \"127.0.0.1\"\nuser = \"u\"\nagent = true\njump = \"bastion\"\n"
	client := mcp.NewClient(&mcp.Implementation{Name: "jump-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: serverCmd(t, writeConfig(t, 0, cfg), stderr)}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, stderr)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_targets", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("list_targets: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), `"name":"web"`) || strings.Contains(string(raw), "bastion") {
		t.Errorf("list_targets: got %s; want web and no bastion", raw)
	}
}
