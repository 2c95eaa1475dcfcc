package feed

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

type noSource struct{}

func (noSource) Actions() []Action { return nil }
func (noSource) Stop(context.Context, string) (StopResult, error) {
	return StopResult{}, nil
}

// TestServerDropsGarbage: a frame that is no request, or over the limit,
// drops the console (its reading ends, not times out); a request is
// answered.
func TestServerDropsGarbage(t *testing.T) {
	s, err := Listen(t.TempDir(), noSource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		name, frame string
		dropped     bool
	}{
		{"garbage", "\x00\x01{not json\n", true},
		{"unknown field", `{"id":1,"stop":{"handle":"x"},"exec":"x"}` + "\n", true},
		{"no id", `{"stop":{"handle":"x"}}` + "\n", true},
		{"stop and answer", `{"id":1,"stop":{"handle":"x"},"answer":{"question":"q","answer":"approve"}}` + "\n", true},
		{"oversize", `{"id":1,"stop":{"handle":"` + strings.Repeat("a", maxRequestBytes) + `"}}` + "\n", true},
		{"an answer", `{"id":7,"answer":{"question":"q","answer":"approve"}}` + "\n", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("unix", s.Path())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte(c.frame))
			conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			sc := bufio.NewScanner(conn)
			var got []string
			for sc.Scan() {
				got = append(got, sc.Text())
				if !c.dropped && strings.HasPrefix(sc.Text(), `{"reply":{"id":7,"error":"no such question`) {
					return
				}
			}
			if !c.dropped {
				t.Fatalf("no reply: %q, %v", got, sc.Err())
			}
			// Dropped with unread bytes, the socket is reset: an error,
			// not a timeout.
			if ne, ok := sc.Err().(net.Error); ok && ne.Timeout() {
				t.Errorf("the console was not dropped: %v, after %q", sc.Err(), got)
			}
		})
	}
}
