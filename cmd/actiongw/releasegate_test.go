//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/mcpserver"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// The release gate: every failure the articles behind this project list,
// through the real binary over real pipes, a real sshd and a real HTTP
// server. Run it with
//
//	CI=1 go test ./cmd/actiongw -run ReleaseGate -v

const (
	// gateResultBytes is the content limit of the gate's server: two
	// results of this size overfill a 64 KiB pipe, and the 32 KiB head and
	// tail previews must shrink to fit it.
	gateResultBytes = 40000
	// gateSlots is the gate server's max_concurrent_actions.
	gateSlots = 4
	// transportFrameBytes is the wire limit of the transport host.
	transportFrameBytes = 16384
	// hugeFieldRSSLimit bounds the server's peak resident memory through
	// 50 MiB lines: holding one would take it over. peakRSSLimit bounds it
	// through everything, a 200 MB output with the host paused included.
	hugeFieldRSSLimit = 64 << 20
	peakRSSLimit      = 100 << 20
)

// TestReleaseGate is the release gate. Each subtest names the item of the
// articles' list it covers and asserts the behaviour, not just survival.
func TestReleaseGate(t *testing.T) {
	api := startGateAPI(t)
	g := startGate(t, api)
	th := startTransportHost(t, api)

	// A credential-carrying request first, so the final secret check has
	// a redaction to look for.
	if r := g.call(t, "http_request", map[string]any{"endpoint": "api", "method": "GET", "path": "/echo"}); r.IsError {
		t.Fatalf("http_request: %s", resultText(r))
	}

	t.Run("request just under and just over the wire limit", th.wireLimit)
	t.Run("malformed JSON", th.malformedJSON)
	t.Run("accidental stdout write", th.strayStdout)
	t.Run("response just under and far over the content limit", g.contentLimit)
	t.Run("huge single field", g.hugeField)
	t.Run("many small content blocks", g.manyBlocks)
	t.Run("noisy stderr", g.noisyStderr)
	t.Run("cancel", g.cancelStates)
	t.Run("host stops reading stdout while actions run", g.blockedHost)
	t.Run("hostile agent", hostileAgent) // servers of its own

	for name, c := range map[string]*mcphost.Client{"gate": g.client, "transport": th.client} {
		if m := c.Metrics(); m.ParseErrors != 0 || m.OversizeFrames != 0 {
			t.Errorf("%s host: %d unparsable and %d oversize frames from the server; want none", name, m.ParseErrors, m.OversizeFrames)
		}
	}
	if largest := g.client.Metrics().LargestFrameIn; largest > gateResultBytes {
		t.Errorf("largest frame from the server %d bytes; want at most result_bytes (%d)", largest, gateResultBytes)
	}
	g.client.Close()
	g.assertNoSecret(t)
}

// gateAPI is the HTTP server behind the gate's endpoint. The first path
// element picks the producer; silent and streaming requests tell the test,
// by the token after it, when they started and when their context ended.
type gateAPI struct {
	srv  *httptest.Server
	done chan struct{}

	mu     sync.Mutex
	probes map[string]*httpProbe
}

type httpProbe struct {
	enterOnce, exitOnce sync.Once
	entered, exited     chan struct{}
}

func startGateAPI(t *testing.T) *gateAPI {
	a := &gateAPI{done: make(chan struct{}), probes: map[string]*httpProbe{}}
	a.srv = httptest.NewServer(a)
	t.Cleanup(func() { close(a.done); a.srv.Close() })
	return a
}

// endpointTOML configures the endpoint "gate" on this server.
func (a *gateAPI) endpointTOML() string {
	return fmt.Sprintf("[http.gate]\nbase_url = %q\nmethods = [\"GET\", \"POST\"]\nauth = \"none\"\nallow_private = true\n", a.srv.URL)
}

func (a *gateAPI) probe(token string) *httpProbe {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.probes[token]
	if p == nil {
		p = &httpProbe{entered: make(chan struct{}), exited: make(chan struct{})}
		a.probes[token] = p
	}
	return p
}

func (a *gateAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, token, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	n, _ := strconv.Atoi(r.URL.Query().Get("n"))
	switch kind {
	case "silent", "stream":
		p := a.probe(token)
		p.enterOnce.Do(func() { close(p.entered) })
		defer p.exitOnce.Do(func() { close(p.exited) })
		if kind == "stream" {
			w.WriteHeader(200)
		}
		for i := 0; ; i++ {
			if kind == "stream" {
				fmt.Fprintf(w, "tick %d\n", i)
				w.(http.Flusher).Flush()
			}
			select {
			case <-r.Context().Done():
				return
			case <-a.done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	case "count":
		got, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "received %d bytes\n", got)
	default:
		w.Write(gateBody(kind, n))
	}
}

// gateBody is the body the gate's endpoint sends for kind and n, so a test
// knows every byte it should be told about.
func gateBody(kind string, n int) []byte {
	switch kind {
	case "field": // one JSON object with one string field of n bytes
		return []byte(`{"data":"` + strings.Repeat("a", n) + `"}`)
	case "items": // a JSON array of n small objects, one a line
		var b bytes.Buffer
		b.WriteString("[\n")
		for i := range n {
			fmt.Fprintf(&b, "{\"id\":%d,\"ok\":true},\n", i)
		}
		b.WriteString("{}]\n")
		return b.Bytes()
	case "broken": // malformed JSON with a NUL and invalid UTF-8
		return []byte("{\"items\":[1,2,\x00\xff\xfe\"unterminated\n")
	case "big":
		return bytes.Repeat([]byte("b"), n)
	}
	return []byte("ok\n")
}

// gateServed is startServed's server with the endpoint "gate" and the
// gate's limits.
type gateServed struct {
	*served
	api *gateAPI
}

func startGate(t *testing.T, api *gateAPI) *gateServed {
	t.Helper()
	limits := fmt.Sprintf("result_bytes = %d\nhead_bytes = 32768\ntail_bytes = 32768\nmax_concurrent_actions = %d",
		gateResultBytes, gateSlots)
	return &gateServed{startServedWith(t, servedOptions{server: limits, tables: api.endpointTOML()}), api}
}

// transportHost is `actiongw serve` built with the emit tool, with the gate's
// endpoint and a small wire limit; it collects the server's null-id errors.
type transportHost struct {
	client *mcphost.Client
	stderr *syncbuf.Buffer
	api    *gateAPI
	errs   chan *jsonrpc.Error
}

func startTransportHost(t *testing.T, api *gateAPI) *transportHost {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("[server]\nstate_dir = %q\nlog_level = \"debug\"\nmax_frame_bytes = %d\nresult_bytes = 8192\n%s",
		filepath.Join(dir, "state"), transportFrameBytes, api.endpointTOML())
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &transportHost{stderr: &syncbuf.Buffer{}, api: api, errs: make(chan *jsonrpc.Error, 64)}
	cmd := exec.Command(testenv.Actiongw(t, "testtools"), "serve", "-config", path)
	cmd.Env = append(os.Environ(), "ACTIONGW_CONFIG=", "ACTIONGW_KEYRING_SERVICE=actiongw-gate-"+randomHex(t, 6))
	cmd.Stderr = h.stderr
	var err error
	h.client, err = mcphost.Start(context.Background(), cmd, mcphost.Options{OnError: func(e *jsonrpc.Error) {
		select {
		case h.errs <- e:
		default: // far more than expected: stillServes reports the ones kept
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.client.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.client.Initialize(ctx); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, h.stderr)
	}
	return h
}

func (h *transportHost) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := h.client.CallTool(ctx, name, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

// nextError waits for the server's next null-id error.
func (h *transportHost) nextError(t *testing.T) *jsonrpc.Error {
	t.Helper()
	select {
	case e := <-h.errs:
		return e
	case <-time.After(20 * time.Second):
		t.Fatal("no error response from the server")
		return nil
	}
}

// stillServes runs a real action on the session: it must answer, and no
// frame so far may have drawn an error the test did not take.
func (h *transportHost) stillServes(t *testing.T) {
	t.Helper()
	r := h.call(t, "http_request", gateGET("/echo/after", 0))
	if out := decode[actionResult](t, r); r.IsError || out.Body.Head != "ok\n" {
		t.Fatalf("the session stopped serving actions: %s", resultText(r))
	}
	if n := len(h.errs); n != 0 {
		t.Errorf("%d unexpected null-id errors from the server, the first: %v", n, <-h.errs)
	}
}

// countFrame is a tools/call that POSTs a padding body to the gate's
// /count, exactly size bytes long; it returns the frame and the padding
// length the remote should report.
func countFrame(t *testing.T, id int64, size int) ([]byte, int) {
	t.Helper()
	head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"http_request","arguments":{"endpoint":"gate","method":"POST","path":"/count","body":"`, id)
	tail := `"}}}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("frame size %d too small", size)
	}
	frame := make([]byte, 0, size)
	frame = append(frame, head...)
	frame = append(frame, bytes.Repeat([]byte("x"), pad)...)
	return append(frame, tail...), pad
}

// wireLimit: frames of exactly the limit and one byte under reach the remote
// intact; one byte over, and 50 MiB over, are answered with a null-id
// error naming the limit, never held in memory, and the session goes on.
func (h *transportHost) wireLimit(t *testing.T) {
	const limit = transportFrameBytes
	ctx := context.Background()
	tests := []struct {
		name     string
		size     int
		accepted bool
	}{
		{"one byte under", limit - 1, true},
		{"exactly the limit", limit, true},
		{"one byte over", limit + 1, false},
		{"a 50 MiB frame", 50 << 20, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := int64(1<<40 + i)
			frame, pad := countFrame(t, id, tt.size)
			p, err := h.client.SendFrame(ctx, id, frame)
			if err != nil {
				t.Fatal(err)
			}
			if tt.accepted {
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				r, err := p.WaitTool(wctx)
				if err != nil {
					t.Fatalf("frame of %d bytes: got %v; want a result", tt.size, err)
				}
				if got, want := decode[actionResult](t, r).Body.Head, fmt.Sprintf("received %d bytes\n", pad); got != want {
					t.Errorf("remote got %q; want %q", got, want)
				}
				return
			}
			// The id is in the frame's first bytes: the call gets the error.
			_, err = p.Wait(ctx)
			if e := (*jsonrpc.Error)(nil); !errors.As(err, &e) || e.Code != jsonrpc.CodeInvalidRequest || !strings.Contains(e.Message, fmt.Sprint(limit)) || !strings.Contains(e.Message, fmt.Sprint(tt.size)) {
				t.Errorf("got %v; want error -32600 naming the limit %d and the size %d", err, limit, tt.size)
			}
			h.stillServes(t)
		})
	}
	if hwm := peakRSS(t, h.client.Pid()); hwm > hugeFieldRSSLimit {
		t.Errorf("server peak RSS %d MiB after a 50 MiB frame; want under %d MiB", hwm>>20, hugeFieldRSSLimit>>20)
	} else {
		t.Logf("server peak RSS %.1f MiB after a 50 MiB frame", float64(hwm)/(1<<20))
	}
}

// malformedJSON: frames that are not JSON get a parse error each (with
// the frame's id when it shows one, so its call ends) and the session runs
// a real action after every one; a remote answering malformed JSON still
// yields a well-formed, exact result.
func (h *transportHost) malformedJSON(t *testing.T) {
	frames := []struct {
		name  string
		id    int64 // 0: none to read
		frame string
	}{
		{"cut object", 1<<41 + 1, `{"jsonrpc":"2.0","id":2199023255553,"method":`},
		{"cut tool call", 1<<41 + 2, `{"jsonrpc":"2.0","id":2199023255554,"method":"tools/call","params":{"name":"http_request","arguments":{"endpoint":"gate"`},
		{"plain text", 0, `hello`},
		{"invalid UTF-8", 0, "\xff\xfe{"},
		{"NUL byte", 0, "\x00"},
	}
	for _, tt := range frames {
		t.Run(tt.name, func(t *testing.T) {
			p, err := h.client.SendFrame(context.Background(), tt.id, []byte(tt.frame))
			if err != nil {
				t.Fatal(err)
			}
			var e *jsonrpc.Error
			if tt.id == 0 {
				e = h.nextError(t)
			} else if _, err := p.Wait(context.Background()); !errors.As(err, &e) {
				t.Fatalf("got %v; want the call's error", err)
			}
			if e.Code != jsonrpc.CodeParseError {
				t.Errorf("got %d %q; want a parse error (-32700)", e.Code, e.Message)
			}
			h.stillServes(t)
		})
	}
	t.Run("from the remote", func(t *testing.T) {
		r := h.call(t, "http_request", gateGET("/broken", 0))
		checkExact(t, "body", decode[actionResult](t, r).Body, gateBody("broken", 0))
	})
	var hs mcpserver.Health
	decodeInto(t, h.call(t, "health", map[string]any{}), &hs)
	if hs.Transport.ParseErrors != int64(len(frames)) {
		t.Errorf("server parse_errors %d; want %d", hs.Transport.ParseErrors, len(frames))
	}
}

// strayStdout: while real actions run, the emit tool prints to the
// process's stdout a forged response to a call in flight, half a frame and
// plain text. None of it reaches the protocol stream.
func (h *transportHost) strayStdout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	token := randomHex(t, 6)
	inflight, err := h.client.StartTool(ctx, "http_request", gateGET("/silent/"+token, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	probe := h.api.probe(token)
	waitChan(t, probe.entered, "the silent request to reach the remote")
	forged := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"FORGED"}]}}`+"\n", inflight.ID())
	strays := []string{forged, `{"jsonrpc":"2.0","id":`, "STRAY plain text without a newline"}
	var wg sync.WaitGroup
	errs := make(chan string, 32)
	for i, stray := range strays {
		wg.Go(func() {
			r, err := h.client.CallTool(ctx, "emit", map[string]any{"echo": fmt.Sprint("emit ", i), "stray": stray}, nil)
			switch {
			case err != nil:
				errs <- fmt.Sprintf("emit %d: %v", i, err)
			case r.IsError || resultText(r) != fmt.Sprint("emit ", i):
				errs <- fmt.Sprintf("emit %d: %s", i, resultText(r))
			}
		})
		wg.Go(func() {
			r, err := h.client.CallTool(ctx, "http_request", gateGET(fmt.Sprint("/echo/", i), 0), nil)
			switch {
			case err != nil:
				errs <- fmt.Sprintf("http_request %d: %v", i, err)
			case r.IsError:
				errs <- fmt.Sprintf("http_request %d: %s", i, resultText(r))
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	// The forged response must not have answered the call in flight.
	wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer wcancel()
	if r, err := inflight.WaitTool(wctx); err == nil {
		t.Fatalf("the call in flight was answered by a stray print: %s", resultText(r))
	}
	// Wait cancelled it on its timeout: the remote request ends.
	waitChan(t, probe.exited, "the cancelled request to end at the remote")
	h.stillServes(t)
	if m := h.client.Metrics(); m.ParseErrors != 0 || m.ResponsesDropped != 0 {
		t.Errorf("host saw %d unparsable frames and %d unmatched responses; want none", m.ParseErrors, m.ResponsesDropped)
	}
	for _, want := range []string{"FORGED", "STRAY plain text"} {
		if !strings.Contains(h.stderr.String(), want) {
			t.Errorf("%q is not on the server's stderr", want)
		}
	}
}

// actionResult is what the gate checks of an ssh_exec or http_request
// result.
type actionResult struct {
	Status   string        `json:"status"`
	ExitCode *int          `json:"exit_code"`
	Handle   string        `json:"handle"`
	Stdout   output.Stream `json:"stdout"`
	Stderr   output.Stream `json:"stderr"`
	Body     output.Stream `json:"body"`
}

// stream is the summary of the stream called name.
func (a actionResult) stream(name string) output.Stream {
	return map[string]output.Stream{"stdout": a.Stdout, "stderr": a.Stderr, "body": a.Body}[name]
}

func decodeInto(t *testing.T, r *mcp.CallToolResult, v any) {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		t.Fatalf("structured content: %v (text %q)", err, resultText(r))
	}
}

func (g *gateServed) health(t *testing.T) mcpserver.Health {
	t.Helper()
	var h mcpserver.Health
	decodeInto(t, g.call(t, "health", map[string]any{}), &h)
	return h
}

func boxArgs(command string) map[string]any {
	return map[string]any{"target": "box", "command": command}
}

// gateGET asks the gate's endpoint for path, with n as the query parameter
// n when it is not zero.
func gateGET(path string, n int) map[string]any {
	args := map[string]any{"endpoint": "gate", "method": "GET", "path": path}
	if n != 0 {
		args["query"] = map[string]string{"n": strconv.Itoa(n)}
	}
	return args
}

// letters is a command printing n bytes of "a" and no newline.
func letters(n int) string { return fmt.Sprintf("head -c %d /dev/zero | tr '\\0' a", n) }

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// callSized calls a tool with nothing else in flight on the session and
// returns the result with the size of its response frame as the host read
// it. The result must be well-formed, one text block with structured
// content, and fit the content limit.
func (g *gateServed) callSized(t *testing.T, name string, args map[string]any) (*mcp.CallToolResult, int) {
	t.Helper()
	before := g.client.Metrics().StdinBytes
	r := g.call(t, name, args)
	size := int(g.client.Metrics().StdinBytes - before)
	if size > gateResultBytes {
		t.Errorf("%s: response of %d bytes; want at most result_bytes (%d)", name, size, gateResultBytes)
	}
	if len(r.Content) != 1 || r.StructuredContent == nil {
		t.Errorf("%s: %d content blocks, structured %v; want one text block and structured content", name, len(r.Content), r.StructuredContent != nil)
	}
	return r, size
}

// checkExact asserts that a stream summary counts want exactly and that its
// previews are valid UTF-8 taken from it.
func checkExact(t *testing.T, name string, got output.Stream, want []byte) {
	t.Helper()
	sum := sha256.Sum256(want)
	lines := int64(bytes.Count(want, []byte("\n")))
	if len(want) > 0 && want[len(want)-1] != '\n' {
		lines++
	}
	if got.Bytes != int64(len(want)) || got.Lines != lines || got.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: bytes %d, lines %d, sha256 %.12s; want %d, %d, %.12s", name, got.Bytes, got.Lines, got.SHA256, len(want), lines, hex.EncodeToString(sum[:]))
	}
	if got.Binary {
		return
	}
	if !utf8.ValidString(got.Head) || !utf8.ValidString(got.Tail) || !bytes.HasPrefix(want, []byte(got.Head)) || !bytes.HasSuffix(want, []byte(got.Tail)) {
		t.Errorf("%s: head (%d bytes) and tail (%d bytes) are not valid UTF-8 from the start and end of the stream", name, len(got.Head), len(got.Tail))
	}
	if wantTrunc := len(got.Head)+len(got.Tail) < len(want); got.Truncated != wantTrunc {
		t.Errorf("%s: truncated %v with %d of %d bytes shown", name, got.Truncated, len(got.Head)+len(got.Tail), len(want))
	}
}

// saysWhatIsLeftOut asserts that the text of a result with a truncated
// stream names what was not shown and how to read it.
func saysWhatIsLeftOut(t *testing.T, r *mcp.CallToolResult) {
	t.Helper()
	if text := resultText(r); !strings.Contains(text, "not shown") || !strings.Contains(text, "read_output") {
		t.Errorf("result text does not say what was left out and how to get it:\n%s", text)
	}
}

// contentLimit: an ssh_exec result calibrated to land just under
// result_bytes is complete; one about a hundred bytes larger, and outputs far
// over it (large, escaped, multibyte, both streams, an HTTP body, a page,
// a search), are shrunk to fit and say what was left out.
func (g *gateServed) contentLimit(t *testing.T) {
	// The frame of a result with a known output gives the fixed cost; the
	// server counts a 256-byte id where the host's is a few digits.
	// Under half of result_bytes: each byte of output is in the response
	// twice, in structuredContent and in the text.
	const n0 = 17000
	_, f0 := g.callSized(t, "ssh_exec", boxArgs(letters(n0)))
	room := (gateResultBytes - f0 - output.EnvelopeIDBytes) / 2
	under, over := n0+room-48, n0+room+48
	t.Run("just under", func(t *testing.T) {
		r, size := g.callSized(t, "ssh_exec", boxArgs(letters(under)))
		out := decode[actionResult](t, r)
		checkExact(t, "stdout", out.Stdout, bytes.Repeat([]byte("a"), under))
		if out.Stdout.Truncated {
			t.Errorf("a result just under the limit was truncated (frame %d bytes)", size)
		}
		if size < gateResultBytes-output.EnvelopeIDBytes-256 {
			t.Errorf("frame %d bytes; the calibration missed \"just under\" %d", size, gateResultBytes)
		}
		t.Logf("%d bytes of output: frame %d bytes, complete", under, size)
	})
	t.Run("just over", func(t *testing.T) {
		r, size := g.callSized(t, "ssh_exec", boxArgs(letters(over)))
		out := decode[actionResult](t, r)
		checkExact(t, "stdout", out.Stdout, bytes.Repeat([]byte("a"), over))
		if !out.Stdout.Truncated {
			t.Errorf("a result just over the limit was not shrunk")
		}
		saysWhatIsLeftOut(t, r)
		t.Logf("%d bytes of output: frame %d bytes, preview %d bytes", over, size, len(out.Stdout.Head)+len(out.Stdout.Tail))
	})
	t.Run("far over", func(t *testing.T) {
		// 12-byte lines, so the cut falls between characters.
		escaped := `yes '"\<>&é€` + "\t" + `' | head -c 3000000`
		tests := []struct {
			name    string
			tool    string
			args    map[string]any
			streams []string
		}{
			{"10 MB on stdout, 2 MB on stderr", "ssh_exec", boxArgs("seq 1 1500000; seq 1 300000 >&2"), []string{"stdout", "stderr"}},
			{"escaped and multibyte", "ssh_exec", boxArgs(escaped), []string{"stdout"}},
			{"an HTTP body", "http_request", gateGET("/items", 50000), []string{"body"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r, size := g.callSized(t, tt.tool, tt.args)
				out := decode[actionResult](t, r)
				for _, name := range tt.streams {
					s := out.stream(name)
					if !s.Truncated || !utf8.ValidString(s.Head) || !utf8.ValidString(s.Tail) {
						t.Errorf("%s: truncated %v, valid UTF-8 previews %v; want truncated, valid", name, s.Truncated, utf8.ValidString(s.Head+s.Tail))
					}
				}
				saysWhatIsLeftOut(t, r)
				t.Logf("frame %d bytes", size)
				if tt.tool != "ssh_exec" {
					return
				}
				// Paging and searching the rest fit the limit too.
				r, _ = g.callSized(t, "read_output", map[string]any{"handle": out.Handle, "stream": "stdout", "offset": 1000, "limit": 10 << 20})
				if p := decode[output.Page](t, r); len(p.Data) == 0 || p.Offset != 1000 || p.NextOffset != p.Offset+int64(len(p.Data)) {
					t.Errorf("read_output: %d bytes at %d, next %d", len(p.Data), p.Offset, p.NextOffset)
				}
				g.callSized(t, "search_output", map[string]any{"handle": out.Handle, "stream": "stdout", "pattern": ".", "max_matches": 100000})
			})
		}
	})
}

// hugeField: one 50 MiB line from the remote, in ssh_exec and as one JSON
// string field in http_request, is counted exactly while the result stays
// within the limit and the server's memory bounded.
func (g *gateServed) hugeField(t *testing.T) {
	const size = 50 << 20
	tests := []struct {
		name, tool, stream string
		args               map[string]any
		want               []byte
	}{
		{"ssh_exec stdout", "ssh_exec", "stdout", boxArgs(letters(size)), bytes.Repeat([]byte("a"), size)},
		{"http_request JSON field", "http_request", "body", gateGET("/field", size), gateBody("field", size)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			r, frame := g.callSized(t, tt.tool, tt.args)
			out := decode[actionResult](t, r)
			checkExact(t, tt.stream, out.stream(tt.stream), tt.want)
			saysWhatIsLeftOut(t, r)
			t.Logf("%d bytes in %v, frame %d bytes", len(tt.want), time.Since(start).Round(time.Millisecond), frame)
		})
	}
	hwm := peakRSS(t, g.client.Pid())
	if hwm > hugeFieldRSSLimit {
		t.Errorf("server peak RSS %d MiB; want under %d MiB", hwm>>20, hugeFieldRSSLimit>>20)
	}
	t.Logf("server peak RSS %.1f MiB", float64(hwm)/(1<<20))
}

// manyBlocks: 200k tiny lines, 20k lines each in its own write (its own
// SSH data packet), and an HTTP body of 100k small JSON items: counted
// exactly, one bounded text block each.
func (g *gateServed) manyBlocks(t *testing.T) {
	tests := []struct {
		name, tool, stream string
		args               map[string]any
		want               []byte
	}{
		{"200k lines", "ssh_exec", "stdout", boxArgs("seq 1 200000"), seqOutput(200000)},
		{"20k flushed writes", "ssh_exec", "stdout", boxArgs(`awk 'BEGIN { for (i = 1; i <= 20000; i++) { print i; fflush() } }'`), seqOutput(20000)},
		{"100k JSON items", "http_request", "body", gateGET("/items", 100000), gateBody("items", 100000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, frame := g.callSized(t, tt.tool, tt.args)
			out := decode[actionResult](t, r)
			checkExact(t, tt.stream, out.stream(tt.stream), tt.want)
			saysWhatIsLeftOut(t, r)
			t.Logf("frame %d bytes", frame)
		})
	}
}

// noisyStderr: megabytes on the remote's stderr next to a small stdout,
// and interleaved lines, are kept apart and counted; the server's own
// debug log is all JSON lines on stderr, carries none of the remote's
// output, and never disturbs the protocol stream.
func (g *gateServed) noisyStderr(t *testing.T) {
	logBefore := len(g.stderr.String())
	t.Run("remote stderr floods, stdout small", func(t *testing.T) {
		r, _ := g.callSized(t, "ssh_exec", boxArgs("head -c 5000000 /dev/zero | tr '\\0' e >&2; echo small"))
		out := decode[actionResult](t, r)
		checkExact(t, "stdout", out.Stdout, []byte("small\n"))
		checkExact(t, "stderr", out.Stderr, bytes.Repeat([]byte("e"), 5000000))
	})
	t.Run("interleaved", func(t *testing.T) {
		const n = 5000
		r, _ := g.callSized(t, "ssh_exec", boxArgs(fmt.Sprintf("for i in $(seq 1 %d); do echo out$i; echo noise$i >&2; done", n)))
		out := decode[actionResult](t, r)
		var wantOut, wantErr bytes.Buffer
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&wantOut, "out%d\n", i)
			fmt.Fprintf(&wantErr, "noise%d\n", i)
		}
		checkExact(t, "stdout", out.Stdout, wantOut.Bytes())
		checkExact(t, "stderr", out.Stderr, wantErr.Bytes())
	})
	t.Run("server log floods while actions run", func(t *testing.T) {
		// Every malformed frame and every cancel is a log line; the
		// actions' results must come through the flood unharmed.
		const noise, actions = 3000, 20
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		failures := make(chan string, noise+actions)
		wg.Go(func() {
			for i := range noise {
				if _, err := g.client.SendFrame(ctx, 0, []byte("noise: not JSON")); err != nil {
					failures <- err.Error()
				}
				if err := g.client.Cancel(int64(1<<41+i), "noise"); err != nil {
					failures <- err.Error()
				}
			}
		})
		for i := range actions {
			wg.Go(func() {
				r, err := g.client.CallTool(ctx, "ssh_exec", boxArgs(fmt.Sprint("seq 1 ", 1000*i)), nil)
				if err != nil {
					failures <- err.Error()
					return
				}
				var out actionResult
				b, _ := json.Marshal(r.StructuredContent)
				want := sha256.Sum256(seqOutput(1000 * i))
				if json.Unmarshal(b, &out) != nil || out.Stdout.SHA256 != hex.EncodeToString(want[:]) {
					failures <- fmt.Sprintf("seq 1 %d: %s", 1000*i, resultText(r))
				}
			})
		}
		wg.Wait()
		close(failures)
		for f := range failures {
			t.Error(f)
		}
		// The reader logs each frame before it reads the next: once this
		// call is answered, the whole flood is on its way to stderr.
		g.health(t)
		var log string
		var lines []string
		testenv.WaitFor(t, 10*time.Second, "the flood on the server's stderr", func() bool {
			log = g.stderr.String()[logBefore:]
			lines = strings.Split(strings.TrimSuffix(log, "\n"), "\n")
			return len(lines) >= 2*noise
		})
		for i, line := range lines {
			if !json.Valid([]byte(line)) {
				t.Fatalf("server stderr line %d is not a JSON log record: %.200q", i, line)
			}
		}
		if strings.Contains(log, "noise4999") || strings.Contains(log, "eeeeeeee") {
			t.Error("the remote's output reached the server's log")
		}
		if m := g.client.Metrics(); m.ParseErrors != 0 {
			t.Errorf("host saw %d unparsable frames", m.ParseErrors)
		}
		t.Logf("%d log lines, %d bytes on the server's stderr", len(lines), len(log))
	})
}

// call is one prepared tool call whose remote side the test can watch.
type call struct {
	tool string
	args map[string]any
	// key is what the audit log records of the call: command or path.
	key string
	// started waits until the remote producer runs; stopped reports
	// whether it ended within d. Both are nil for quick calls.
	started func(t *testing.T)
	stopped func(d time.Duration) bool
}

// producer prepares a call of tool whose remote side is kind: "silent"
// (runs, says nothing), "output" (writes without end), "quick" (a line and
// done) or "big" (a result that fills the content limit).
func (g *gateServed) producer(t *testing.T, tool, kind string) call {
	t.Helper()
	token := randomHex(t, 6)
	if tool == "http_request" {
		path := map[string]string{"silent": "/silent/", "output": "/stream/", "quick": "/echo/", "big": "/big/"}[kind] + token
		c := call{tool: tool, key: path, args: gateGET(path, 0)}
		if kind == "big" {
			c.args = gateGET(path, 100000)
		}
		if kind == "silent" || kind == "output" {
			p := g.api.probe(token)
			c.started = func(t *testing.T) { waitChan(t, p.entered, "the request to reach the remote") }
			c.stopped = func(d time.Duration) bool {
				select {
				case <-p.exited:
					return true
				case <-time.After(d):
					return false
				}
			}
		}
		return c
	}
	pidFile := filepath.Join("/tmp", "actiongw-gate-"+token)
	t.Cleanup(func() { os.Remove(pidFile) })
	command := map[string]string{
		"silent": "echo $$ > " + pidFile + "; exec sleep 60",
		"output": "echo $$ > " + pidFile + "; exec yes",
		"quick":  "echo quick " + token,
		"big":    letters(100000) + "; : " + token,
	}[kind]
	c := call{tool: tool, key: command, args: boxArgs(command)}
	if kind == "silent" || kind == "output" {
		var pid int
		c.started = func(t *testing.T) { pid = waitPID(t, pidFile) }
		c.stopped = func(d time.Duration) bool { return sshtest.WaitGone(pid, d) }
	}
	return c
}

func (g *gateServed) start(t *testing.T, c call, progress mcphost.ProgressFunc) *mcphost.Pending {
	t.Helper()
	p, err := g.client.StartTool(context.Background(), c.tool, c.args, progress)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (g *gateServed) cancel(t *testing.T, p *mcphost.Pending) {
	t.Helper()
	if err := g.client.Cancel(p.ID(), "release gate"); err != nil {
		t.Fatal(err)
	}
}

// audit returns the intent and outcome records of the call whose command
// or path is key; zero records when there are none (yet).
func (g *gateServed) audit(key string) (intent, outcome audit.Record) {
	data, _ := os.ReadFile(filepath.Join(g.state, "audit.jsonl"))
	for _, line := range strings.Split(string(data), "\n") {
		var r audit.Record
		if json.Unmarshal([]byte(line), &r) != nil {
			continue
		}
		if r.Kind == "intent" && (r.Command == key || r.Path == key) {
			intent = r
		}
		if r.Kind == "outcome" && intent.Handle != "" && r.Handle == intent.Handle {
			outcome = r
		}
	}
	return intent, outcome
}

func (g *gateServed) outcome(t *testing.T, key string) audit.Record {
	t.Helper()
	var rec audit.Record
	testenv.WaitFor(t, 10*time.Second, "the outcome record of "+key, func() bool {
		_, rec = g.audit(key)
		return rec.Kind != ""
	})
	return rec
}

// cancelStates cancels ssh_exec and http_request in each state the articles
// name; after every cancel a second request on the session is answered
// promptly and no action slot is left taken.
func (g *gateServed) cancelStates(t *testing.T) {
	states := []struct {
		name  string
		tools []string
		run   func(t *testing.T, tool string)
	}{
		{"before work starts: waiting for a slot", []string{"ssh_exec", "http_request"}, g.cancelQueued},
		{"before work starts: connecting", []string{"ssh_exec"}, g.cancelConnecting},
		{"during output: remote I/O with progress flowing to the host", []string{"ssh_exec", "http_request"}, func(t *testing.T, tool string) { g.cancelRunning(t, tool, "output") }},
		{"during a silent remote process", []string{"ssh_exec", "http_request"}, func(t *testing.T, tool string) { g.cancelRunning(t, tool, "silent") }},
		{"after the response started", []string{"ssh_exec", "http_request"}, g.cancelMidResponse},
		{"after the response arrived", []string{"ssh_exec", "http_request"}, g.cancelAnswered},
	}
	for _, st := range states {
		for _, tool := range st.tools {
			t.Run(tool+"/"+st.name, func(t *testing.T) {
				st.run(t, tool)
				g.secondRequest(t)
			})
		}
	}
}

// secondRequest is the proof of recovery: small requests of both tools are
// answered promptly, and no action is left running.
func (g *gateServed) secondRequest(t *testing.T) {
	t.Helper()
	g.promptly(t)
	if r := g.call(t, "http_request", gateGET("/echo/second", 0)); r.IsError {
		t.Errorf("http_request after the cancel: %s", resultText(r))
	}
	testenv.WaitFor(t, 10*time.Second, "no action running", func() bool { return g.health(t).ActiveActions == 0 })
}

// cancelQueued cancels a call waiting for an action slot: it never starts,
// not even once the slots free up.
func (g *gateServed) cancelQueued(t *testing.T, tool string) {
	var fillers []call
	var pending []*mcphost.Pending
	for range gateSlots {
		c := g.producer(t, "http_request", "silent")
		pending = append(pending, g.start(t, c, nil))
		c.started(t)
		fillers = append(fillers, c)
	}
	victim := g.producer(t, tool, "quick")
	// stderr keeps what earlier calls logged: the victim's wait is one more.
	waits := strings.Count(g.stderr.String(), "waiting for a slot")
	p := g.start(t, victim, nil)
	testenv.WaitFor(t, 20*time.Second, "the call to wait for a slot", func() bool {
		return strings.Count(g.stderr.String(), "waiting for a slot") > waits
	})
	if h := g.health(t); h.ActiveActions != gateSlots {
		t.Fatalf("%d actions running; want the %d fillers only", h.ActiveActions, gateSlots)
	}
	g.cancel(t, p)
	for i, c := range fillers {
		g.cancel(t, pending[i])
		if !c.stopped(5 * time.Second) {
			t.Fatalf("filler %d still running 5 s after its cancel", i)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the slots to free up", func() bool { return g.health(t).ActiveActions == 0 })
	g.promptly(t)
	// It is audited as a call that did not start: no command ran.
	if _, outcome := g.audit(victim.key); outcome.Status != "cancelled" || !strings.HasPrefix(outcome.Reason, "did not start") {
		t.Errorf("the cancelled call's outcome: %+v; want cancelled, did not start", outcome)
	}
}

// cancelConnecting cancels ssh_exec while its dial waits for a server that
// accepted the TCP connection and never speaks.
func (g *gateServed) cancelConnecting(t *testing.T, _ string) {
	command := "true " + randomHex(t, 6)
	p := g.start(t, call{tool: "ssh_exec", args: map[string]any{"target": "hang", "command": command}}, nil)
	testenv.WaitFor(t, 20*time.Second, "the dial to wait for a banner", func() bool { return g.hangAccepts.Load() > 0 })
	cancelled := time.Now()
	g.cancel(t, p)
	if rec := g.outcome(t, command); rec.Status != "cancelled" {
		t.Errorf("outcome %+v; want cancelled", rec)
	}
	t.Logf("cancel -> outcome on record: %v", time.Since(cancelled).Round(time.Millisecond))
}

// cancelRunning cancels a call whose remote producer is running: silent,
// or writing output that flows to the host as progress. The producer is
// gone soon after, and the outcome says cancelled.
func (g *gateServed) cancelRunning(t *testing.T, tool, kind string) {
	c := g.producer(t, tool, kind)
	progressed := make(chan struct{}, 1)
	p := g.start(t, c, func(mcp.ProgressNotificationParams) {
		select {
		case progressed <- struct{}{}:
		default:
		}
	})
	c.started(t)
	if kind == "output" {
		waitChan(t, progressed, "progress from the running call")
	}
	cancelled := time.Now()
	g.cancel(t, p)
	if !c.stopped(5 * time.Second) {
		t.Fatalf("remote producer still running 5 s after the cancel")
	}
	t.Logf("cancel -> remote producer gone: %v", time.Since(cancelled).Round(time.Millisecond))
	rec := g.outcome(t, c.key)
	if rec.Status != "cancelled" || (tool == "ssh_exec" && (rec.RemoteStopped == nil || !*rec.RemoteStopped)) {
		t.Errorf("outcome %+v; want cancelled (with remote_stopped true for ssh_exec)", rec)
	}
}

// cancelMidResponse cancels a call whose response is half written to a
// pipe the host does not read: the server cannot take the bytes back, so
// the host gets the whole frame late, ignores it, and the stream stays
// intact.
func (g *gateServed) cancelMidResponse(t *testing.T, tool string) {
	serverBefore, before := g.health(t), g.client.Metrics()
	g.client.PauseReading()
	defer g.client.ResumeReading()
	victim, fillers := g.fillPipe(t, func() call { return g.producer(t, tool, "big") })
	victimKey := fillers[victim].key
	p := fillers[victim].p
	g.cancel(t, p)
	testenv.WaitFor(t, 10*time.Second, "the server to read the cancel", func() bool { return g.logged("cancel received", p.ID()) })
	g.client.ResumeReading()
	for i, f := range fillers {
		if i != victim {
			waitTool(t, f.p)
		}
	}
	testenv.WaitFor(t, 10*time.Second, "the late response to arrive", func() bool {
		return g.client.Metrics().ResponsesDropped == before.ResponsesDropped+1
	})
	if m := g.client.Metrics(); m.ParseErrors != before.ParseErrors {
		t.Errorf("host saw %d unparsable frames", m.ParseErrors-before.ParseErrors)
	}
	if got := g.health(t).Transport.ResponsesDropped - serverBefore.Transport.ResponsesDropped; got != 0 {
		t.Errorf("server dropped %d responses; want none: a response it began to write goes out whole", got)
	}
	if rec := g.outcome(t, victimKey); rec.Status != "exited" && rec.Status != "ok" {
		t.Errorf("outcome %+v; want the finished action on record", rec)
	}
}

type filler struct {
	key string
	p   *mcphost.Pending
}

// fillPipe, with the host paused, starts calls made by mk one at a time,
// each once the server has written what it could of the previous response,
// until the server's stdout pipe is full. The index it returns is of the
// call whose response the writer is blocked in.
func (g *gateServed) fillPipe(t *testing.T, mk func() call) (int, []filler) {
	t.Helper()
	// Bytes the server wrote to stdout: what the host read plus what waits
	// in the pipe. Reading it back moves bytes from one to the other.
	written := func() int64 {
		read := g.client.Metrics().StdinBytes
		unread, _, _ := g.client.StdoutBacklog()
		return read + int64(unread)
	}
	var fillers []filler
	for i := range 8 {
		before := written()
		c := mk()
		fillers = append(fillers, filler{c.key, g.start(t, c, nil)})
		testenv.WaitFor(t, 20*time.Second, "the server to write the response", func() bool { return written() > before })
		// One write copies all that fits at once; wait until it stops.
		last := int64(-1)
		testenv.WaitFor(t, 5*time.Second, "the write to settle", func() bool {
			now := written()
			settled := now == last
			last = now
			return settled
		})
		if g.pipeFull() {
			t.Logf("server's stdout pipe full after %d responses", i+1)
			return i, fillers
		}
	}
	t.Fatal("8 responses did not fill the server's stdout pipe")
	return 0, nil
}

// pipeFull reports whether the server's stdout pipe is full, so a writer
// is blocked. A pipe is a ring of pages, and frames of any size leave the
// last one partly used: full is less than a page free.
func (g *gateServed) pipeFull() bool {
	unread, capacity, err := g.client.StdoutBacklog()
	return err == nil && capacity-unread < 4096
}

func waitTool(t *testing.T, p *mcphost.Pending) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := p.WaitTool(ctx)
	if err != nil {
		t.Fatalf("call %d: %v", p.ID(), err)
	}
	return r
}

// cancelAnswered cancels a call that already answered: the server counts
// the cancel and nothing else happens.
func (g *gateServed) cancelAnswered(t *testing.T, tool string) {
	c := g.producer(t, tool, "quick")
	p := g.start(t, c, nil)
	if r := waitTool(t, p); r.IsError {
		t.Fatalf("%s", resultText(r))
	}
	before, hostBefore := g.health(t), g.client.Metrics()
	g.cancel(t, p)
	after := g.health(t)
	if after.Transport.CancelsReceived != before.Transport.CancelsReceived+1 || after.Transport.ResponsesDropped != before.Transport.ResponsesDropped {
		t.Errorf("server cancels_received %d -> %d, responses_dropped %d -> %d; want one more cancel and no drop",
			before.Transport.CancelsReceived, after.Transport.CancelsReceived, before.Transport.ResponsesDropped, after.Transport.ResponsesDropped)
	}
	if m := g.client.Metrics(); m.ResponsesDropped != hostBefore.ResponsesDropped {
		t.Errorf("host received %d unmatched responses", m.ResponsesDropped-hostBefore.ResponsesDropped)
	}
}

// blockedHost: the host stops reading stdout until the pipe is full, then
// starts a 200 MB ssh_exec, a silent one it cancels, an http_request, a
// quick ssh_exec and a ping. While the host still reads nothing the server
// reads all of it, stops the cancelled process, drains the 200 MB channel
// to its end and queues every answer; once the host reads again all
// arrive, the cancelled one never, with the server's memory bounded.
func (g *gateServed) blockedHost(t *testing.T) {
	const hugeSize = 200_000_000
	c := g.client
	healthBefore, hostBefore := g.health(t), c.Metrics()
	c.PauseReading()
	defer c.ResumeReading()
	_, fillers := g.fillPipe(t, func() call { return g.producer(t, "ssh_exec", "big") })

	hugePID := filepath.Join("/tmp", "actiongw-gate-"+randomHex(t, 6))
	t.Cleanup(func() { os.Remove(hugePID) })
	huge := g.start(t, call{tool: "ssh_exec", args: boxArgs(fmt.Sprintf("echo $$ > %s; exec head -c %d /dev/zero", hugePID, hugeSize))}, nil)
	victim := g.producer(t, "ssh_exec", "silent")
	victimP := g.start(t, victim, nil)
	web := g.start(t, g.producer(t, "http_request", "quick"), nil)
	quick := g.start(t, g.producer(t, "ssh_exec", "quick"), nil)
	ping, err := c.Send(context.Background(), "ping", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pid := waitPID(t, hugePID)
	victim.started(t)
	g.cancel(t, victimP)
	if !victim.stopped(10 * time.Second) {
		t.Fatal("the cancelled process still runs 10 s after the cancel, while the host is paused")
	}
	if !sshtest.WaitGone(pid, 90*time.Second) {
		t.Fatal("the 200 MB command has not finished after 90 s with the host paused: its channel is not drained")
	}
	t.Logf("200 MB drained with the host paused in %v", time.Since(start).Round(time.Millisecond))
	for _, p := range []*mcphost.Pending{ping, web, quick, huge} {
		testenv.WaitFor(t, 30*time.Second, fmt.Sprintf("the answer to call %d to be queued", p.ID()), func() bool { return g.logged("response queued", p.ID()) })
	}
	if !g.pipeFull() {
		t.Fatal("the server's stdout pipe is not full: the test did not keep it blocked")
	}
	hwm := peakRSS(t, c.Pid())

	c.ResumeReading()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := ping.Wait(ctx); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
	out := decode[actionResult](t, waitTool(t, huge))
	if out.Status != "exited" || out.ExitCode == nil || *out.ExitCode != 0 || out.Stdout.Bytes != hugeSize {
		t.Errorf("200 MB command: status %s, %d bytes; want exited 0 with %d", out.Status, out.Stdout.Bytes, hugeSize)
	}
	for _, p := range []*mcphost.Pending{web, quick} {
		if r := waitTool(t, p); r.IsError {
			t.Errorf("call %d: %s", p.ID(), resultText(r))
		}
	}
	for _, f := range fillers {
		waitTool(t, f.p)
	}
	// The cancelled call answers once its stop is verified, which on a
	// loaded machine may come after the others: wait for its drop.
	var after mcpserver.Health
	testenv.Eventually(30*time.Second, func() bool {
		after = g.health(t)
		return after.Transport.ResponsesDropped-healthBefore.Transport.ResponsesDropped >= 1
	})
	if got := after.Transport.ResponsesDropped - healthBefore.Transport.ResponsesDropped; got != 1 {
		t.Errorf("server dropped %d responses; want the cancelled call's", got)
	}
	if got := after.Transport.StdoutBlockedMS - healthBefore.Transport.StdoutBlockedMS; got < 100 {
		t.Errorf("stdout_blocked_ms grew by %d; want the blocked write counted", got)
	}
	if m := c.Metrics(); m.ResponsesDropped != hostBefore.ResponsesDropped {
		t.Errorf("host received %d responses for no waiting call; want 0", m.ResponsesDropped-hostBefore.ResponsesDropped)
	}
	if hwm > peakRSSLimit {
		t.Errorf("server peak RSS %d MiB; want under %d MiB", hwm>>20, peakRSSLimit>>20)
	}
	t.Logf("server peak RSS %.1f MiB", float64(hwm)/(1<<20))
}

// logged reports whether the server logged msg about call id.
func (g *gateServed) logged(msg string, id int64) bool {
	for line := range strings.SplitSeq(g.stderr.String(), "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		var rec struct {
			Msg string   `json:"msg"`
			ID  *float64 `json:"id"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.ID != nil && int64(*rec.ID) == id {
			return true
		}
	}
	return false
}

// peakRSS is a process's peak resident memory (VmHWM) in bytes.
func peakRSS(t testing.TB, pid int) int64 { return procMemory(t, pid, "VmHWM") }

// procMemory is one memory field of /proc/PID/status ("VmRSS", "VmHWM")
// in bytes.
func procMemory(t testing.TB, pid int, field string) int64 {
	t.Helper()
	n, err := proc.Memory(pid, field)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func waitChan(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
