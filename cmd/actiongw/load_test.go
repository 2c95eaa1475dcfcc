//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
)

// TestServeLoad sends 200 concurrent ssh_exec and 500 concurrent
// http_request calls through one MCP session: each gets exactly one
// well-formed result or a busy error, and each action exactly one intent
// and one outcome record in a chain that verifies.
func TestServeLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("load test")
	}
	s := startServed(t, "signal")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type call struct {
		tool string
		args map[string]any
		want string // in the result's stdout or body
	}
	var calls []call
	for i := range 200 {
		calls = append(calls, call{"ssh_exec", map[string]any{"target": "box", "command": fmt.Sprintf("echo n%d", i)}, fmt.Sprintf("n%d\n", i)})
	}
	for i := range 500 {
		calls = append(calls, call{"http_request", map[string]any{"endpoint": "api", "method": "GET", "path": fmt.Sprintf("/echo/%d", i)}, "auth=Bearer [REDACTED:api-token]\n"})
	}
	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		ok, busy      int
		problems      []string
		handlesByTool = map[string]int{}
	)
	for _, c := range calls {
		wg.Go(func() {
			res, err := s.client.CallTool(ctx, c.tool, c.args, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s: %v", c.tool, err))
			case res.IsError && strings.Contains(resultText(res), "busy"):
				busy++
			case res.IsError:
				problems = append(problems, fmt.Sprintf("%s: %s", c.tool, resultText(res)))
			default:
				var out struct {
					Handle string
					Stdout output.Stream
					Body   output.Stream
				}
				b, _ := json.Marshal(res.StructuredContent)
				json.Unmarshal(b, &out)
				if out.Stdout.Head+out.Body.Head != c.want || out.Handle == "" {
					problems = append(problems, fmt.Sprintf("%s: got %s", c.tool, b))
				}
				ok++
				handlesByTool[c.tool]++
			}
		})
	}
	wg.Wait()
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	t.Logf("%d results, %d busy", ok, busy)
	if ok+busy != len(calls) || ok == 0 {
		t.Errorf("%d results + %d busy for %d calls", ok, busy, len(calls))
	}

	path := filepath.Join(s.state, "audit.jsonl")
	if _, err := audit.Verify(path); err != nil {
		t.Fatalf("audit chain: %v", err)
	}
	data, _ := os.ReadFile(path)
	kinds := map[string][]audit.Kind{}
	notStarted := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == audit.KindKey {
			continue // the first start's key record
		}
		if r.Kind == "outcome" && r.Status == "busy" {
			notStarted++
			if !strings.HasPrefix(r.Reason, "did not start") {
				t.Errorf("busy call audited with reason %q; want it to say it did not start", r.Reason)
			}
		}
		kinds[r.Handle] = append(kinds[r.Handle], r.Kind)
	}
	if len(kinds) != ok+busy || notStarted != busy {
		t.Errorf("%d calls, %d of them busy, in the audit log; want %d and %d", len(kinds), notStarted, ok+busy, busy)
	}
	for h, k := range kinds {
		if len(k) != 2 || k[0] != "intent" || k[1] != "outcome" {
			t.Errorf("action %s has records %v; want [intent outcome]", h, k)
		}
	}
	if m := s.client.Metrics(); m.ResponsesDropped != 0 {
		t.Errorf("%d responses matched no call", m.ResponsesDropped)
	}
}
