//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/output"
)

// TestHostileEchoBounded: a refusal that quotes the agent's argument back
// (an unknown target, a header or query name) must still fit result_bytes,
// whatever the argument's size: a 1.5 MB name, or one of control
// characters that JSON writes six bytes each, must not come back as a
// result larger than the content limit, be the refusal the gateway's or
// the SDK's.
func TestHostileEchoBounded(t *testing.T) {
	const resultBytes = 8192
	s := startServedWith(t, servedOptions{server: "result_bytes = 8192"})
	long := strings.Repeat("n", 1_500_000) // the frames stay under max_frame_bytes
	ctl := strings.Repeat("\x01", 500_000)
	for _, c := range []struct {
		name string
		tool string
		args map[string]any
	}{
		{"ssh target", "ssh_exec", map[string]any{"target": long, "command": "true"}},
		{"ssh target of control characters", "ssh_exec", map[string]any{"target": ctl, "command": "true"}},
		{"download target", "ssh_download", map[string]any{"target": long, "path": "/tmp/x"}},
		{"upload target", "ssh_upload", map[string]any{"target": long, "path": "/tmp/x", "content": "x"}},
		{"endpoint", "http_request", map[string]any{"endpoint": long, "method": "GET", "path": "/"}},
		{"header name", "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/", "headers": map[string]string{"X-" + long: "a\x01"}}},
		{"query name", "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/", "query": map[string]string{long: "a\x01"}}},
		{"query name of control characters", "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/", "query": map[string]string{"a" + strings.Repeat("\u00ff", 500_000): "\x01"}}},
		// The SDK's own refusals, before any tool runs.
		{"unknown property", "ssh_exec", map[string]any{"target": "box", "command": "true", long: 1}},
		{"value outside an enum", "list_actions", map[string]any{"status": long}},
		{"value of another type", "ssh_exec", map[string]any{"target": []string{long}, "command": "true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := s.call(t, c.tool, c.args)
			b, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			if !r.IsError || len(b) > resultBytes {
				t.Errorf("got a %d-byte result (isError %v): %s; want an error within result_bytes (%d)", len(b), r.IsError, output.Clip(resultText(r), 300), resultBytes)
			}
		})
	}
	// An unknown tool is a JSON-RPC error, not a tool result.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.client.CallTool(ctx, long, map[string]any{}, nil); err == nil || len(err.Error()) > resultBytes {
		t.Errorf("an unknown tool with a %d-byte name: a %d-byte error; want one within result_bytes (%d)", len(long), len(fmt.Sprint(err)), resultBytes)
	}
	s.promptly(t)
}
