package tour

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/demo"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/mcpserver"
	"github.com/actiongw/actiongw/mcpserver/mcphost"
)

// The demo's commands and the bounds it holds the server to.
const (
	demoTimeout  = 60 * time.Second // the whole demo; it takes a few seconds
	stepTimeout  = 30 * time.Second
	seqLast      = 7_000_000 // `seq 1 seqLast` prints about 55 MB
	searchNumber = 6_543_210
	slowTicks    = 600
	// promptBound is the longest a request after a cancel may take for the
	// demo to call it answered at once; it is typically a few ms.
	promptBound = 2 * time.Second
)

const demoIntro = `actiongw demo: actiongw's own MCP host client starts 'actiongw serve -demo' as a
subprocess and talks MCP to it over its stdin and stdout, as an agent's host would.
The serve process runs a sandbox inside itself:
  - an SSH server and an HTTP API that listen on 127.0.0.1 only;
  - their SSH keys and API token are generated at start and exist only in the
    serve process's memory: no keyring, no file, no config;
  - commands run with /bin/sh on this machine as you (%s), so an agent using the
    sandbox gets nothing you do not already have.
`

// Options say which program the tour starts and where it writes.
type Options struct {
	// Executable is the actiongw binary; the tour runs its `serve -demo`.
	Executable string
	// Version is the client version the tour's host reports.
	Version string
	// Stdout gets the transcript, Stderr the serve process's log when a
	// step fails.
	Stdout, Stderr io.Writer
}

// Run is `actiongw demo`: the sandbox driven through the real protocol,
// with a transcript on o.Stdout. It fails naming the first step that did
// not behave.
func Run(ctx context.Context, o Options) error {
	// The serve process's temporary files (its state directory, with the
	// audit log the demo reads, and the slow command's pid file) go here.
	tmp, err := os.MkdirTemp("", "actiongw-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(tmp)
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, demoTimeout)
	defer cancel()

	serverLog := &tailBuffer{max: 32 << 10}
	cmd := exec.Command(o.Executable, "serve", "-demo")
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stderr = serverLog
	d := &demoRun{out: o.Stdout, tmp: tmp, start: time.Now(), answers: make(chan *mcp.ElicitResult, 1)}
	client, err := mcphost.Start(ctx, cmd, mcphost.Options{Name: "actiongw-demo", Version: o.Version, OnElicit: d.ask})
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.client = client
	err = d.run(ctx)
	if closeErr := client.Close(); err == nil && closeErr != nil {
		err = fmt.Errorf("serve process: %w", closeErr)
	}
	if err == nil {
		err = d.checkCleanedUp()
	}
	if interrupted := context.Cause(parent); interrupted != nil {
		return fmt.Errorf("demo interrupted: %w", interrupted)
	}
	if err != nil {
		fmt.Fprintf(o.Stderr, "the serve process's log (last %d KiB):\n%s\n", serverLog.max>>10, serverLog)
		return fmt.Errorf("demo failed: %w", err)
	}
	fmt.Fprintf(d.out, "\ndemo passed: %d steps in %s; the serve process stopped its servers and removed its files.\n", d.n, seconds(time.Since(d.start)))
	return nil
}

// demoRun is one run of the demo.
type demoRun struct {
	out    io.Writer
	client *mcphost.Client
	tmp    string
	start  time.Time
	n      int // steps begun

	mu sync.Mutex // the transcript: progress lines and questions come from the client's goroutines

	// answers holds what the person answers to the next question; a
	// question with none planned fails its step.
	answers chan *mcp.ElicitResult

	bigHandle string
	bigBytes  int64
}

func (d *demoRun) printf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format, args...)
}

func (d *demoRun) run(ctx context.Context) error {
	name := "you"
	if u, err := user.Current(); err == nil {
		name = "user " + u.Username
	}
	d.printf(demoIntro, name)
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"initialize", d.initialize},
		{"list_targets", d.listTargets},
		{"ssh_exec: a command that prints about 55 MB", d.bigOutput},
		{"read_output: pages of that output by handle", d.readOutput},
		{"search_output: find a line in it", d.searchOutput},
		{"http_request: the server injects the API token", d.httpEcho},
		{"http_request: a POST waits for the person at the client to approve it", d.approval},
		{"ssh_exec: a slow command, cancelled mid-output", d.cancelSlow},
		{"a second request after the cancel", d.secondRequest},
		{"a long action: started in the background, followed, cancelled by handle", d.background},
		{"health: transport metrics", d.health},
	}
	for _, s := range steps {
		d.n++
		d.printf("\n%d. %s\n", d.n, s.name)
		began := time.Now()
		sctx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := s.run(sctx)
		cancel()
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", d.n, s.name, err)
		}
		d.printf("   ok, %s\n", millis(time.Since(began)))
	}
	return nil
}

func (d *demoRun) initialize(ctx context.Context) error {
	res, err := d.client.Initialize(ctx)
	if err != nil {
		return err
	}
	if res.ServerInfo == nil || res.ServerInfo.Name != "actiongw" {
		return fmt.Errorf("got server info %+v; want actiongw", res.ServerInfo)
	}
	d.printf("   server %s %s, MCP protocol %s, serve process pid %d\n", res.ServerInfo.Name, res.ServerInfo.Version, res.ProtocolVersion, d.client.Pid())
	return nil
}

func (d *demoRun) listTargets(ctx context.Context) error {
	var out struct {
		SSH []struct {
			Name, User, Host, Description string
		} `json:"ssh"`
		HTTP []struct {
			Name        string   `json:"name"`
			BaseURL     string   `json:"base_url"`
			Methods     []string `json:"methods"`
			Description string   `json:"description"`
		} `json:"http"`
	}
	if err := d.call(ctx, "list_targets", map[string]any{}, nil, &out); err != nil {
		return err
	}
	if len(out.SSH) != 1 || out.SSH[0].Name != demo.SSHTarget || len(out.HTTP) != 1 || out.HTTP[0].Name != demo.HTTPEndpoint {
		return fmt.Errorf("got targets %+v; want ssh %q and http %q", out, demo.SSHTarget, demo.HTTPEndpoint)
	}
	s, h := out.SSH[0], out.HTTP[0]
	d.printf("   ssh  %-9s %s@%s  %s\n", s.Name, s.User, s.Host, s.Description)
	d.printf("   http %-9s %s %v  %s\n", h.Name, h.BaseURL, h.Methods, h.Description)
	d.printf("   (names and addresses only: no credential is ever shown to the agent)\n")
	return nil
}

func (d *demoRun) bigOutput(ctx context.Context) error {
	command := fmt.Sprintf("seq 1 %d", seqLast)
	d.printf("   $ %s\n", command)
	var out gateway.SSHExecOutput
	raw, err := d.callRaw(ctx, "ssh_exec", map[string]any{"target": demo.SSHTarget, "command": command}, d.progressPrinter("received"), &out)
	if err != nil {
		return err
	}
	want := seqOffset(seqLast + 1)
	if out.Status != "exited" || out.ExitCode == nil || *out.ExitCode != 0 {
		return fmt.Errorf("got status %s, exit code %v (%s); want exited 0", out.Status, out.ExitCode, out.Reason)
	}
	if out.Stdout.Bytes != want || out.Stdout.Lines != seqLast || !out.Stdout.Truncated || out.Handle == "" {
		return fmt.Errorf("got stdout %d bytes, %d lines, truncated %v, handle %q; want %d bytes, %d lines, truncated, a handle",
			out.Stdout.Bytes, out.Stdout.Lines, out.Stdout.Truncated, out.Handle, want, seqLast)
	}
	if !strings.HasPrefix(out.Stdout.Head, "1\n2\n3\n") || !strings.HasSuffix(out.Stdout.Tail, fmt.Sprintf("%d\n", seqLast)) {
		return fmt.Errorf("the preview is not the start and end of the output")
	}
	d.bigHandle, d.bigBytes = out.Handle, out.Stdout.Bytes
	d.printf("   status %s, exit code %d, %s\n", out.Status, *out.ExitCode, millis(time.Duration(out.DurationMS)*time.Millisecond))
	d.printf("   stdout: %s, %d lines, sha256 %.16s…\n", megabytes(out.Stdout.Bytes), out.Stdout.Lines, out.Stdout.SHA256)
	d.printf("   preview: head %s … tail %s (%d + %d bytes)\n", preview(out.Stdout.Head, 3, true), preview(out.Stdout.Tail, 3, false), len(out.Stdout.Head), len(out.Stdout.Tail))
	d.printf("   truncated: %v, handle: %s\n", out.Stdout.Truncated, out.Handle)
	d.printf("   the agent received %s of JSON for %s of output\n", kilobytes(int64(len(raw))), megabytes(out.Stdout.Bytes))
	return nil
}

func (d *demoRun) readOutput(ctx context.Context) error {
	mid := d.bigBytes / 2
	var page output.Page
	if err := d.call(ctx, "read_output", map[string]any{"handle": d.bigHandle, "stream": "stdout", "offset": mid, "limit": 48}, nil, &page); err != nil {
		return err
	}
	// A page cut by its limit ends at a line.
	want := seqText(mid, 48)
	want = want[:strings.LastIndexByte(want, '\n')+1]
	if page.Offset != mid || page.Data != want {
		return fmt.Errorf("read at offset %d: got offset %d, data %q; want %q", mid, page.Offset, page.Data, want)
	}
	d.printf("   offset %d, limit 48 bytes, up to the last whole line: %s\n", mid, quoteLines(page.Data))
	d.printf("   next_offset %d, eof %v, total_bytes %d\n", page.NextOffset, page.EOF, page.TotalBytes)
	var end output.Page
	if err := d.call(ctx, "read_output", map[string]any{"handle": d.bigHandle, "stream": "stdout", "offset": -32, "from": "end", "limit": 32}, nil, &end); err != nil {
		return err
	}
	if !end.EOF || end.Data != seqText(d.bigBytes-32, 32) {
		return fmt.Errorf("read from the end: got %q, eof %v; want %q, eof", end.Data, end.EOF, seqText(d.bigBytes-32, 32))
	}
	d.printf("   last 32 bytes: %s (eof %v)\n", quoteLines(end.Data), end.EOF)
	return nil
}

func (d *demoRun) searchOutput(ctx context.Context) error {
	pattern := fmt.Sprintf("^%d$", searchNumber)
	var res output.SearchResult
	if err := d.call(ctx, "search_output", map[string]any{"handle": d.bigHandle, "stream": "stdout", "pattern": pattern}, d.progressPrinter("searched"), &res); err != nil {
		return err
	}
	if len(res.Matches) != 1 || res.Matches[0].Line != searchNumber || res.Matches[0].Offset != seqOffset(searchNumber) {
		return fmt.Errorf("got matches %+v; want one, on line %d at offset %d", res.Matches, searchNumber, seqOffset(searchNumber))
	}
	m := res.Matches[0]
	d.printf("   pattern %q: 1 match, line %d, offset %d, text %q\n", pattern, m.Line, m.Offset, m.Text)
	return nil
}

func (d *demoRun) httpEcho(ctx context.Context) error {
	d.printf("   GET /echo (the demo API echoes the request headers it received)\n")
	var out gateway.HTTPRequestOutput
	raw, err := d.callRaw(ctx, "http_request", map[string]any{"endpoint": demo.HTTPEndpoint, "method": "GET", "path": "/echo"}, nil, &out)
	if err != nil {
		return err
	}
	if out.HTTPStatus != 200 || out.Body.Truncated {
		return fmt.Errorf("got status %s, HTTP %d, truncated %v; want HTTP 200 with the whole body (%s)", out.Status, out.HTTPStatus, out.Body.Truncated, out.Reason)
	}
	want := "Authorization: Bearer [REDACTED:" + demo.TokenSecret + "]\n"
	if !strings.Contains(out.Body.Head, want) {
		return fmt.Errorf("the echoed headers lack %q:\n%s", strings.TrimSpace(want), out.Body.Head)
	}
	if n := strings.Count(string(raw), "Bearer "); n != strings.Count(string(raw), "Bearer [REDACTED:") {
		return fmt.Errorf("the result holds a bearer credential that is not redacted")
	}
	d.printf("   HTTP %d in %s, body %d bytes:\n", out.HTTPStatus, millis(time.Duration(out.DurationMS)*time.Millisecond), out.Body.Bytes)
	for _, line := range strings.Split(strings.TrimRight(out.Body.Head, "\n"), "\n") {
		d.printf("     | %s\n", line)
	}
	d.printf("   the API accepted the token (it answers 401 without it), and the agent saw it only as\n")
	d.printf("   [REDACTED:%s]: actiongw injected it and redacted it on the way back\n", demo.TokenSecret)
	return nil
}

// deploy sends the demo API a POST /deploy of version, which asks the
// person first, and has the person pick decision.
func (d *demoRun) deploy(ctx context.Context, version, decision string) (*mcp.CallToolResult, error) {
	body := map[string]any{"service": "web", "version": version}
	shown, _ := json.Marshal(body)
	d.printf("   POST /deploy %s\n", shown)
	d.answers <- decided(decision)
	res, err := d.client.CallTool(ctx, "http_request", map[string]any{"endpoint": demo.HTTPEndpoint, "method": "POST", "path": "/deploy", "json": body}, nil)
	if err != nil {
		return nil, err
	}
	// The answer is still there when the server did not ask.
	select {
	case <-d.answers:
		return nil, errors.New("the server sent the POST without asking the person")
	default:
	}
	return res, nil
}

func (d *demoRun) approval(ctx context.Context) error {
	d.printf("   (%s has approve_methods = [\"POST\"]: the server asks the person at the client first)\n", demo.HTTPEndpoint)
	res, err := d.deploy(ctx, "1.4.2", "approve")
	if err != nil {
		return err
	}
	var out gateway.HTTPRequestOutput
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &out) != nil || res.IsError {
		return fmt.Errorf("the approved POST: %s", toolText(res))
	}
	if want := "deploy of web 1.4.2 accepted"; out.HTTPStatus != 202 || !strings.HasPrefix(out.Body.Head, want) {
		return fmt.Errorf("got HTTP %d, body %q; want 202 and %q", out.HTTPStatus, out.Body.Head, want)
	}
	d.printf("   approved, so it was sent: HTTP %d in %s, %q\n\n", out.HTTPStatus, millis(time.Duration(out.DurationMS)*time.Millisecond), out.Body.Head)

	if res, err = d.deploy(ctx, "1.5.0-rc1", "deny"); err != nil {
		return err
	}
	if text := toolText(res); !res.IsError || !strings.Contains(text, "declined") {
		return fmt.Errorf("got %q (error %v); want the call refused, declined by the person", text, res.IsError)
	}
	d.printf("   the agent gets an error result: %s\n", toolText(res))
	rec, err := d.outcome(ctx, func(r *audit.Record) bool { return r.Path == "/deploy" })
	if err != nil {
		return err
	}
	if rec.Status != "denied" || rec.Rule != "approve_methods" || rec.HTTPStatus != 0 {
		return fmt.Errorf("got outcome status %q, rule %q, HTTP status %d; want denied under approve_methods, nothing sent", rec.Status, rec.Rule, rec.HTTPStatus)
	}
	d.printf("   audit log outcome: status %s, rule %s, no HTTP status: nothing was sent\n", rec.Status, rec.Rule)
	return nil
}

// ask is the person at the demo's client (mcphost.Options.OnElicit): it
// shows the question as a client would, and gives the answer the step
// planned.
func (d *demoRun) ask(ctx context.Context, q *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "   the server asks the person at the client (elicitation/create):\n")
	for _, line := range strings.Split(strings.TrimRight(q.Message, "\n"), "\n") {
		fmt.Fprintln(d.out, strings.TrimRight("     | "+line, " "))
	}
	select {
	case a := <-d.answers:
		fmt.Fprintf(d.out, "     decision %s → the person picks %s\n", choices(q.RequestedSchema), a.Content["decision"])
		return a, nil
	default:
		return nil, errors.New("the demo planned no answer to this question")
	}
}

// decided is the answer of a person who picks decision in the form.
func decided(decision string) *mcp.ElicitResult {
	return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": decision}}
}

// choices shows the values a question's form offers for its decision.
func choices(schema any) string {
	var form struct {
		Properties struct {
			Decision struct {
				Enum []string `json:"enum"`
			} `json:"decision"`
		} `json:"properties"`
	}
	b, _ := json.Marshal(schema)
	json.Unmarshal(b, &form)
	return "[" + strings.Join(form.Properties.Decision.Enum, " | ") + "]"
}

func (d *demoRun) cancelSlow(ctx context.Context) error {
	pidFile := filepath.Join(d.tmp, "slow.pid")
	command := fmt.Sprintf("echo $$ > %s; for i in $(seq 1 %d); do echo tick $i; sleep 0.05; done", pidFile, slowTicks)
	d.printf("   $ %s\n", command)
	p, err := d.client.StartTool(ctx, "ssh_exec", map[string]any{"target": demo.SSHTarget, "command": command}, d.progressPrinter("received"))
	if err != nil {
		return err
	}
	pid, err := waitPIDFile(ctx, pidFile)
	if err != nil {
		return err
	}
	if !demo.GroupAlive(pid) {
		return fmt.Errorf("the remote shell (pid %d) is not running", pid)
	}
	d.printf("   remote shell pid %d is running (it would tick for %s)\n", pid, seconds(slowTicks*50*time.Millisecond))
	select {
	case <-time.After(time.Second): // let it print for a while
	case <-ctx.Done():
		return ctx.Err()
	}
	cancelled := time.Now()
	if err := d.client.Cancel(p.ID(), "the demo cancels the slow command"); err != nil {
		return err
	}
	d.printf("   sent notifications/cancelled for request %d\n", p.ID())
	if err := waitGone(ctx, pid); err != nil {
		return err
	}
	d.printf("   process group %d gone %s after the cancel\n", pid, millis(time.Since(cancelled)))
	rec, err := d.outcome(ctx, func(r *audit.Record) bool { return r.Command == command })
	if err != nil {
		return err
	}
	if rec.Status != "cancelled" || rec.RemoteStopped == nil || !*rec.RemoteStopped {
		return fmt.Errorf("got outcome status %q, remote_stopped %v; want cancelled and true", rec.Status, rec.RemoteStopped)
	}
	d.printf("   audit log outcome: status %s, remote_stopped %v, reason %q\n", rec.Status, *rec.RemoteStopped, rec.Reason)
	var page output.Page
	if err := d.call(ctx, "read_output", map[string]any{"handle": rec.Handle, "stream": "stdout", "offset": -60, "from": "end"}, nil, &page); err != nil {
		return err
	}
	lines := strings.Split(strings.TrimRight(page.Data, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "tick ") || last == fmt.Sprintf("tick %d", slowTicks) {
		return fmt.Errorf("the output kept for handle %s ends in %q; want a tick short of %d", rec.Handle, last, slowTicks)
	}
	d.printf("   what it printed before the cancel is kept: %d bytes, last line %q (handle %s)\n", page.TotalBytes, last, rec.Handle)
	return nil
}

func (d *demoRun) secondRequest(ctx context.Context) error {
	began := time.Now()
	var out gateway.SSHExecOutput
	if err := d.call(ctx, "ssh_exec", map[string]any{"target": demo.SSHTarget, "command": "echo still here"}, nil, &out); err != nil {
		return err
	}
	took := time.Since(began)
	if out.Stdout.Head != "still here\n" {
		return fmt.Errorf("got stdout %q; want %q", out.Stdout.Head, "still here\n")
	}
	if took > promptBound {
		return fmt.Errorf("answered after %s; want under %s", millis(took), millis(promptBound))
	}
	d.printf("   $ echo still here  →  %q, answered in %s (the session was never stuck)\n", out.Stdout.Head, millis(took))
	return nil
}

// backgroundLines is how many lines of the background command the demo
// follows before it cancels it.
const backgroundLines = 3

func (d *demoRun) background(ctx context.Context) error {
	pidFile := filepath.Join(d.tmp, "background.pid")
	command := fmt.Sprintf("echo $$ > %s; i=0; while true; do i=$((i+1)); echo deploy step $i; sleep 0.2; done", pidFile)
	d.printf("   $ %s   (wait_s 0)\n", command)
	var out gateway.SSHExecOutput
	if err := d.call(ctx, "ssh_exec", map[string]any{"target": demo.SSHTarget, "command": command, "wait_s": 0}, nil, &out); err != nil {
		return err
	}
	if out.Status != gateway.StatusRunning {
		return fmt.Errorf("got status %q; want running", out.Status)
	}
	d.printf("   returned at once: status %s, handle %s; the command goes on\n", out.Status, out.Handle)
	pid, err := waitPIDFile(ctx, pidFile)
	if err != nil {
		return err
	}
	var offset int64
	for seen := 0; seen < backgroundLines; {
		var page output.Page
		args := map[string]any{"handle": out.Handle, "stream": "stdout", "offset": offset, "wait_s": 10}
		if err := d.call(ctx, "read_output", args, nil, &page); err != nil {
			return err
		}
		if !page.Running {
			return fmt.Errorf("read_output: the action is no longer running")
		}
		for _, line := range strings.SplitAfter(page.Data, "\n") {
			if strings.HasSuffix(line, "\n") {
				seen++
				d.printf("   read_output (wait_s 10) → %q at offset %d\n", line, offset)
			}
			offset += int64(len(line))
		}
	}
	res, err := d.client.CallTool(ctx, "cancel_action", map[string]any{"handle": out.Handle}, nil)
	if err != nil {
		return err
	}
	var final gateway.SSHExecOutput
	if b, err := json.Marshal(res.StructuredContent); err != nil || json.Unmarshal(b, &final) != nil {
		return fmt.Errorf("cancel_action: %s", toolText(res))
	}
	if final.Status != gateway.StatusCancelled || final.RemoteStopped == nil || !*final.RemoteStopped {
		return fmt.Errorf("cancel_action: status %q, remote_stopped %v; want cancelled and true", final.Status, final.RemoteStopped)
	}
	if err := waitGone(ctx, pid); err != nil {
		return err
	}
	d.printf("   cancel_action → status %s, remote_stopped true, %d lines in all; process group %d gone\n", final.Status, final.Stdout.Lines, pid)
	return nil
}

func (d *demoRun) health(ctx context.Context) error {
	var out mcpserver.Health
	// The cancelled action's outcome is on record just before it stops
	// counting as active.
	for {
		if err := d.call(ctx, "health", map[string]any{}, nil, &out); err != nil {
			return err
		}
		if out.ActiveActions == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t := out.Transport
	if t.CancelsReceived != 1 || t.OversizeFrames != 0 || t.ParseErrors != 0 || out.ActiveActions != 0 {
		return fmt.Errorf("got %+v; want one cancel received, no bad frames, no action running", out)
	}
	d.printf("   server: %d frames in (%s, largest %d bytes), %d frames out (%s)\n", t.FramesIn, kilobytes(t.StdinBytes), t.LargestFrameIn, t.FramesOut, kilobytes(t.StdoutBytes))
	d.printf("   cancels received %d, responses dropped %d, oversize frames %d, parse errors %d, stdout blocked %d ms\n",
		t.CancelsReceived, t.ResponsesDropped, t.OversizeFrames, t.ParseErrors, t.StdoutBlockedMS)
	d.printf("   active actions %d, uptime %s\n", out.ActiveActions, seconds(time.Duration(out.UptimeMS)*time.Millisecond))
	return nil
}

// call calls a tool, requires a result that is not an error, and decodes
// its structured content into out.
func (d *demoRun) call(ctx context.Context, tool string, args map[string]any, progress mcphost.ProgressFunc, out any) error {
	_, err := d.callRaw(ctx, tool, args, progress, out)
	return err
}

// callRaw is call that also returns the result as the client received it.
func (d *demoRun) callRaw(ctx context.Context, tool string, args map[string]any, progress mcphost.ProgressFunc, out any) ([]byte, error) {
	p, err := d.client.StartTool(ctx, tool, args, progress)
	if err != nil {
		return nil, err
	}
	raw, err := p.Wait(ctx)
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decoding the %s result: %w", tool, err)
	}
	structured, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return nil, err
	}
	if res.IsError {
		if len(structured) > 2048 {
			structured = append(structured[:2048], "…"...)
		}
		return nil, fmt.Errorf("%s failed: %s\nstructured result: %s", tool, toolText(&res), structured)
	}
	if err := json.Unmarshal(structured, out); err != nil {
		return nil, fmt.Errorf("decoding the %s result: %w", tool, err)
	}
	return raw, nil
}

func toolText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

// progressPrinter prints a call's progress notifications, at most two a
// second: "… 12.3 MB received so far".
func (d *demoRun) progressPrinter(verb string) mcphost.ProgressFunc {
	var last time.Time
	return func(p mcp.ProgressNotificationParams) {
		if time.Since(last) < 500*time.Millisecond {
			return
		}
		last = time.Now()
		if p.Total > 0 {
			d.printf("   … %s of %s %s so far\n", size(int64(p.Progress)), size(int64(p.Total)), verb)
			return
		}
		d.printf("   … %s %s so far\n", size(int64(p.Progress)), verb)
	}
}

// outcome finds, in the serve process's audit log, the outcome record of
// the last action whose intent is one it wants.
func (d *demoRun) outcome(ctx context.Context, wants func(*audit.Record) bool) (*audit.Record, error) {
	for {
		logs, _ := filepath.Glob(filepath.Join(d.tmp, "actiongw-demo-*", "audit.jsonl"))
		if len(logs) == 1 {
			if rec := findOutcome(logs[0], wants); rec != nil {
				return rec, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no outcome record for the action in the serve process's audit log")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func findOutcome(path string, wants func(*audit.Record) bool) *audit.Record {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	handle := ""
	outcomes := map[string]*audit.Record{}
	for _, line := range strings.Split(string(data), "\n") {
		var r audit.Record
		if json.Unmarshal([]byte(line), &r) != nil {
			continue
		}
		switch {
		case r.Kind == audit.KindIntent && wants(&r):
			handle = r.Handle
		case r.Kind == audit.KindOutcome:
			outcomes[r.Handle] = &r
		}
	}
	return outcomes[handle]
}

// checkCleanedUp reports whether the serve process removed its state
// directory when it exited.
func (d *demoRun) checkCleanedUp() error {
	left, _ := filepath.Glob(filepath.Join(d.tmp, "actiongw-demo-*"))
	if len(left) > 0 {
		return fmt.Errorf("the serve process left %s behind", left[0])
	}
	return nil
}

// waitPIDFile reads the pid a command wrote to path.
func waitPIDFile(ctx context.Context, path string) (int, error) {
	for {
		data, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(data), "\n") {
			return strconv.Atoi(strings.TrimSpace(string(data)))
		}
		select {
		case <-ctx.Done():
			return 0, errors.New("the slow command did not start")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitGone waits for process group pgid to have no live process.
func waitGone(ctx context.Context, pgid int) error {
	for demo.GroupAlive(pgid) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("process group %d is still running after the cancel", pgid)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// seqOffset is the offset of number n in the output of `seq 1 N`.
func seqOffset(n int64) int64 {
	var off int64
	for digits, lo := int64(1), int64(1); lo < n; digits, lo = digits+1, lo*10 {
		hi := min(n, lo*10) // numbers [lo, hi) have this many digits
		off += (hi - lo) * (digits + 1)
	}
	return off
}

// seqLine is the number whose line in the output of `seq 1 seqLast`
// holds offset off.
func seqLine(off int64) int64 {
	return int64(sort.Search(seqLast, func(i int) bool { return seqOffset(int64(i)+2) > off })) + 1
}

// seqText is n bytes of the output of `seq 1 seqLast` from offset off.
func seqText(off, n int64) string {
	first := seqLine(off)
	skip := off - seqOffset(first)
	var b strings.Builder
	for num := first; int64(b.Len()) < skip+n && num <= seqLast; num++ {
		fmt.Fprintf(&b, "%d\n", num)
	}
	s := b.String()[skip:]
	return s[:min(int64(len(s)), n)]
}

// preview shows the first (or last) n lines of s on one line.
func preview(s string, n int, first bool) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if first {
		lines = lines[:min(n, len(lines))]
	} else {
		lines = lines[max(0, len(lines)-n):]
	}
	return quoteLines(strings.Join(lines, "\n") + "\n")
}

// quoteLines shows text on one line, newlines as ⏎.
func quoteLines(s string) string { return `"` + strings.ReplaceAll(s, "\n", "⏎") + `"` }

func millis(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// size shows a byte count in the unit that suits it.
func size(n int64) string {
	switch {
	case n < 10_000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1_000_000:
		return kilobytes(n)
	}
	return megabytes(n)
}

func kilobytes(n int64) string { return fmt.Sprintf("%.1f KB", float64(n)/1e3) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
