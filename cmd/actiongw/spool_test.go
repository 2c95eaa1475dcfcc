//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
)

// TestServeNewestHandleReadable: with spool_max_bytes = 1024, smaller than
// one action takes on disk, and 2000 small calls, the newest result named
// a handle the spool had already evicted. Now the newest actions stay
// readable past the cap: the last result to arrive is read back at once,
// and so is each of a few calls made one after another; and a result whose
// output is no longer kept says so (spool_error) instead of naming it
// silently.
func TestServeNewestHandleReadable(t *testing.T) {
	if testing.Short() {
		t.Skip("2000 calls")
	}
	s := startServedWith(t, servedOptions{server: "spool_max_bytes = 1024\nmax_concurrent_actions = 64"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		last     string
		problems []string
		gone     int
	)
	for i := range 2000 {
		wg.Go(func() {
			res, err := s.client.CallTool(ctx, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": fmt.Sprintf("/n%d", i)}, nil)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				problems = append(problems, err.Error())
			case res.IsError && strings.Contains(resultText(res), "busy"):
			case res.IsError:
				problems = append(problems, resultText(res))
			default:
				out := decode[gateway.HTTPRequestOutput](t, res)
				if out.Body.SpoolError != "" {
					gone++
					return
				}
				last = out.Handle
			}
		})
	}
	wg.Wait()
	for _, p := range problems[:min(len(problems), 5)] {
		t.Error(p)
	}
	t.Logf("%d of 2000 results say their output was not kept", gone)
	if last == "" {
		t.Fatal("no result said its output was kept")
	}
	readBack := func(what, handle string) {
		t.Helper()
		r := s.call(t, "read_output", map[string]any{"handle": handle, "stream": "body"})
		if r.IsError {
			t.Errorf("read_output of %s: %s; want the output its result named", what, resultText(r))
		}
	}
	readBack("the last result to arrive", last)
	for i := range 5 {
		r := s.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/one"})
		out := decode[gateway.HTTPRequestOutput](t, r)
		if out.Body.SpoolError != "" {
			t.Errorf("call %d alone: spool_error %q; want its output kept", i, out.Body.SpoolError)
			continue
		}
		readBack(fmt.Sprintf("call %d alone", i), out.Handle)
	}
}
