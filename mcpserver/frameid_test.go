package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// rawServer is the server binary on pipes the test writes and reads
// itself, to see the ids of its answers byte for byte, whatever their
// type (the project's host matches only its own numbers).
type rawServer struct {
	t      *testing.T
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *syncbuf.Buffer
}

// startRaw starts serve with the given wire limit (0: the default) and
// completes the handshake.
func startRaw(t *testing.T, maxFrame int) *rawServer {
	t.Helper()
	binary(t)
	stderr := &syncbuf.Buffer{}
	cmd := serverCmd(t, writeConfig(t, maxFrame, ""), stderr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &rawServer{t: t, stdin: stdin, lines: make(chan []byte, 64), stderr: stderr}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(s.lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				s.lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		for range s.lines { // drain, so the server can write and exit
		}
		<-read
		if err := cmd.Wait(); err != nil {
			t.Errorf("server exit: %v", err)
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", stderr.String())
		}
	})
	s.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := s.next(); string(r.ID) != `"init"` || r.Error != nil {
		t.Fatalf("initialize: got %s", r.line)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	return s
}

func (s *rawServer) send(frame string) {
	s.t.Helper()
	if _, err := io.WriteString(s.stdin, frame+"\n"); err != nil {
		s.t.Fatalf("writing to the server: %v", err)
	}
}

// rawResponse is a response as it came, its id unparsed.
type rawResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
	line   []byte
}

// next returns the server's next response, skipping notifications.
func (s *rawServer) next() rawResponse {
	s.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatal("the server's stdout ended")
			}
			var r rawResponse
			if err := json.Unmarshal(line, &r); err != nil {
				s.t.Fatalf("the server wrote %q: %v", line, err)
			}
			if r.ID == nil { // a notification
				continue
			}
			r.line = line
			return r
		case <-deadline:
			s.t.Fatal("no response from the server")
		}
	}
}

// nested is n arrays, one in the other.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestFrameErrorIDs: a frame the server cannot take is answered with its
// own id whenever its top level shows one, of any type and size, before or
// after a member nested deeper than any decoder allows, so the call it
// was ends at the client; a frame whose id cannot be read is answered
// with id null. Each time the session goes on.
func TestFrameErrorIDs(t *testing.T) {
	const limit = 64 << 10
	s := startRaw(t, limit)
	// Deeper than the SDK decodes (1000), and than encoding/json (10000).
	deep, deeper := nested(2000), nested(20000)
	call := func(idMember, args string) string {
		return `{"jsonrpc":"2.0",` + idMember + `"method":"tools/call","params":{"name":"emit","arguments":{"x":` + args + `}}}`
	}
	// TypeScript's SDK writes the id last.
	lastID := func(args, id string) string {
		return `{"method":"tools/call","params":{"name":"emit","arguments":{"x":` + args + `}},"jsonrpc":"2.0","id":` + id + `}`
	}
	pad := `"` + strings.Repeat("p", limit) + `"`
	tests := []struct {
		name     string
		frame    string
		wantID   string
		wantCode int64
		wantText string
	}{
		{"deep, number id first", call(`"id":11,`, deep), `11`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"deep, string id first", call(`"id":"deep-call",`, deep), `"deep-call"`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"deep, large number id", call(`"id":123456789012345678901234567890,`, deep), `123456789012345678901234567890`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"deep, number id last", lastID(deep, `12`), `12`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"deep, string id last", lastID(deep, `"ts-12"`), `"ts-12"`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"deeper than encoding/json, id first", call(`"id":13,`, deeper), `13`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"deeper than encoding/json, id last", lastID(deeper, `"ts-13"`), `"ts-13"`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"the id is the deep value", `{"jsonrpc":"2.0","id":` + deep + `,"method":"ping"}`, `null`, jsonrpc.CodeInvalidRequest, "nesting depth"},
		{"broken after the id", `{"jsonrpc":"2.0","id":"broken","method":`, `"broken"`, jsonrpc.CodeParseError, "not valid JSON"},
		{"broken inside a deep member after the id", call(`"id":14,`, deep[:3000]), `14`, jsonrpc.CodeParseError, "not valid JSON"},
		{"wrong version", `{"jsonrpc":"1.0","id":902,"method":"ping"}`, `902`, jsonrpc.CodeInvalidRequest, "invalid request"},
		{"method of the wrong type", `{"jsonrpc":"2.0","id":903,"method":5}`, `903`, jsonrpc.CodeInvalidRequest, "invalid request"},
		{"an id of the wrong type", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, `null`, jsonrpc.CodeInvalidRequest, "invalid request"},
		{"garbage", `hello`, `null`, jsonrpc.CodeParseError, "not valid JSON"},
		{"batch", `[{"jsonrpc":"2.0","id":900,"method":"ping"}]`, `null`, jsonrpc.CodeInvalidRequest, "batches are not supported"},
		{"oversize, id first", call(`"id":"big-first",`, pad), `"big-first"`, jsonrpc.CodeInvalidRequest, "max_frame_bytes"},
		{"oversize, id last", lastID(pad, `15`), `15`, jsonrpc.CodeInvalidRequest, "max_frame_bytes"},
		{"oversize, id in the middle", `{"jsonrpc":"2.0","a":` + pad + `,"id":16,"b":` + pad + `}`, `null`, jsonrpc.CodeInvalidRequest, "max_frame_bytes"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.t = t
			s.send(tt.frame)
			r := s.next()
			if string(r.ID) != tt.wantID || r.Error == nil || r.Error.Code != tt.wantCode || !strings.Contains(r.Error.Message, tt.wantText) {
				t.Errorf("got %.300s; want an error %d containing %q with id %s", r.line, tt.wantCode, tt.wantText, tt.wantID)
			}
			// The session goes on.
			ping := fmt.Sprintf(`"ping-%d"`, i)
			s.send(`{"jsonrpc":"2.0","id":` + ping + `,"method":"ping"}`)
			if r := s.next(); string(r.ID) != ping || r.Error != nil {
				t.Fatalf("ping after the bad frame: got %s", r.line)
			}
		})
	}
}
