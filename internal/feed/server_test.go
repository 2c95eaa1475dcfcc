package feed

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

type noSource struct{}

func (noSource) Actions() []Action { return nil }
func (noSource) Recent() []Output  { return nil }
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

// TestServerPage: a serve hands a question's place on the page of the
// console that connected last and told one, and refuses a page address
// that could carry a credential or lead off this machine (the console
// stays connected: its request is refused, not garbage).
func TestServerPage(t *testing.T) {
	s, err := Listen(t.TempDir(), noSource{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	posted := func() string {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan string, 1)
		s.Ask(ctx, Question{Text: "q"}, func(page string) {
			got <- page
			cancel()
		})
		return <-got
	}
	if p := posted(); p != "" {
		t.Fatalf("with no console, the question's page is %q; want none", p)
	}
	conn, err := net.Dial("unix", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sc := bufio.NewScanner(conn)
	sc.Buffer(nil, maxFrameBytes)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	send := func(id int, url string) string {
		t.Helper()
		fmt.Fprintf(conn, `{"id":%d,"page":{"url":%q}}`+"\n", id, url)
		want := fmt.Sprintf(`{"reply":{"id":%d`, id)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), want) {
				return sc.Text()
			}
		}
		t.Fatalf("no reply to page %q: %v", url, sc.Err())
		return ""
	}
	for i, bad := range []string{
		"http://127.0.0.1:8080/login?token=SECRET",
		"http://127.0.0.1:8080/#x",
		"http://user:pw@127.0.0.1:8080/",
		"http://example.com:8080/",
		"http://10.0.0.1:8080/",
		"https://127.0.0.1:8080/",
		"http://127.0.0.1/",
		"http://127.0.0.1:8080/other",
		"javascript:alert(1)",
	} {
		if r := send(i+1, bad); !strings.Contains(r, `"error":"the console's page`) {
			t.Errorf("page %q: %s; want it refused", bad, r)
		}
	}
	if p := posted(); p != "" {
		t.Fatalf("after refused pages, the question's page is %q; want none", p)
	}
	if r := send(100, "http://127.0.0.1:8080/"); strings.Contains(r, "error") {
		t.Fatalf("a loopback page: %s", r)
	}
	if p, want := posted(), regexp.MustCompile(`^http://127\.0\.0\.1:8080/#question=[A-Z0-9]+$`); !want.MatchString(p) {
		t.Errorf("the question's page is %q; want the console's page and its id", p)
	}
	// A console that connects later and tells its page is the one
	// handed; the first one's leaving does not matter then.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := Watch(ctx, filepath.Dir(filepath.Dir(s.Path())))
	w.SetPage("http://[::1]:9090/")
	testenv.WaitFor(t, time.Minute, "the second console's page", func() bool {
		return strings.HasPrefix(posted(), "http://[::1]:9090/#question=")
	})
	cancel()
	w.Wait()
	testenv.WaitFor(t, time.Minute, "the first console's page again, the second gone", func() bool {
		return strings.HasPrefix(posted(), "http://127.0.0.1:8080/#question=")
	})
}
