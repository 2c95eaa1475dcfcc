//go:build linux

package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/output"
)

// TestHostileEchoBounded: a refusal that quotes the agent's argument back
// (an unknown target, a header or query name) must still fit result_bytes,
// whatever the argument's size: a 3 MB name, or one of control
// characters that JSON writes six bytes each, must not come back as a
// result larger than the content limit.
func TestHostileEchoBounded(t *testing.T) {
	const resultBytes = 8192
	s := startServedWith(t, servedOptions{server: "result_bytes = 8192"})
	long := strings.Repeat("n", 3_000_000)
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
	s.promptly(t)
}
