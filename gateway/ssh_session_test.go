package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
	"github.com/actiongw/actiongw/secrets"
)

// The typed secret of the session tests, and a keyring item no target
// lets a session type.
const (
	typedSecret = "Zq8-Pa55word-enable-71"
	otherSecret = "never-typed-secret-93"
)

// sessionFixture is a gateway on a real sshd (sessions need a terminal,
// which the demo's server does not give) with target term (sessions,
// the secret "enable" typeable), plain (no sessions) and an extra target
// of the test's.
type sessionFixture struct {
	gw    *Gateway
	s     *sshtest.Server
	state string
	cfg   *config.Config
}

func newSessionFixture(t *testing.T, opts sshtest.Options, extra string) *sessionFixture {
	t.Helper()
	s := sshtest.Start(t, opts)
	s.RequirePTY(t)
	state := t.TempDir()
	target := func(name, more string) string {
		return fmt.Sprintf("[ssh.%s]\nhost = %q\nport = %d\nuser = %q\nkey_secret = \"box-key\"\nknown_hosts = %q\n%s\n",
			name, s.Host, s.Port, s.User, s.KnownHosts, more)
	}
	text := fmt.Sprintf("[server]\nstate_dir = %q\nmax_terminal_sessions = 3\n", state) +
		target("term", "allow_sessions = true\nallow_secret_input = [\"enable\"]\nallow_env = [\"GREETING\"]") +
		target("plain", "") + extra
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	store := secrets.Memory{"box-key": s.ClientKey, "enable": []byte(typedSecret), "other": []byte(otherSecret),
		audit.KeyName: audit.NewKey()}
	gw := New(context.Background(), Options{Config: cfg, Secrets: store})
	t.Cleanup(func() { gw.Close() })
	return &sessionFixture{gw: gw, s: s, state: state, cfg: cfg}
}

// start opens a session and fails the test unless it runs.
func (f *sessionFixture) start(t *testing.T, in SSHSessionStartInput) *SSHSessionOutput {
	t.Helper()
	if in.Target == "" {
		in.Target = "term"
	}
	r := f.gw.SSHSessionStart(context.Background(), in, nil)
	out, ok := r.Structured.(*SSHSessionOutput)
	if r.IsError || !ok || out.Status != StatusRunning {
		t.Fatalf("ssh_session_start %+v: %s", in, r.Text)
	}
	t.Cleanup(func() { f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle}) })
	return out
}

// send sends in and returns its result, failing the test on an error.
func (f *sessionFixture) send(t *testing.T, in SSHSessionSendInput) *SSHSessionOutput {
	t.Helper()
	r := f.gw.SSHSessionSend(context.Background(), in)
	out, ok := r.Structured.(*SSHSessionOutput)
	if !ok {
		t.Fatalf("ssh_session_send %+v: %s", in, r.Text)
	}
	if in.WaitFor != "" && (out.Matched == nil || !*out.Matched) {
		tr := f.gw.ReadOutput(context.Background(), ReadOutputInput{Handle: in.Handle, Stream: "terminal", From: "end", Offset: 2000})
		t.Logf("the transcript's end: %s", structured(t, tr))
		t.Fatalf("ssh_session_send %+v: the screen never matched %q:\n%s", in, in.WaitFor, r.Text)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// What a person would do at a prompt, a REPL and a pager, through the
// real sshd, each ended and its processes verified gone.
func TestSession(t *testing.T) {
	f := newSessionFixture(t, sshtest.Options{}, "")
	t.Run("shell prompt", func(t *testing.T) {
		out := f.start(t, SSHSessionStartInput{Command: "bash", Env: map[string]string{"GREETING": "hello"}, Cols: 100, Rows: 30})
		got := f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "echo $GREETING-$((6*7)) $(stty size)", Keys: []string{"Enter"}, WaitFor: `(?m)^hello-42 30 100$`})
		if !strings.Contains(got.Output, "hello-42 30 100") {
			t.Errorf("output %q; want the command's line", got.Output)
		}
		got = f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "sleep 987011", Keys: []string{"Enter"}, WaitS: ptr(0.5)})
		got = f.send(t, SSHSessionSendInput{Handle: out.Handle, Keys: []string{"Ctrl-C"}})
		got = f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "echo after-$?", Keys: []string{"Enter"}, WaitFor: `after-130`})
		end := f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle})
		fin, ok := end.Structured.(*SSHSessionOutput)
		if !ok || fin.Status != StatusCancelled || fin.RemoteStopped == nil || !*fin.RemoteStopped {
			t.Fatalf("cancel_action: %s; want cancelled and verified gone", end.Text)
		}
		if fin.Recording == nil || fin.Recording.SHA256 == "" || !strings.Contains(fin.Recording.Head, `"version":2`) {
			t.Errorf("recording %+v; want an asciicast v2 stream", fin.Recording)
		}
	})
	t.Run("exit", func(t *testing.T) {
		out := f.start(t, SSHSessionStartInput{})
		f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "exit 4", Keys: []string{"Enter"}})
		r := f.gw.ActionStatus(context.Background(), ActionStatusInput{Handle: out.Handle, WaitS: ptr(30.0)}, nil)
		fin, ok := r.Structured.(*SSHSessionOutput)
		if !ok || fin.Status != StatusExited || fin.ExitCode == nil || *fin.ExitCode != 4 || !r.IsError {
			t.Fatalf("action_status after exit: %s; want exited with 4", r.Text)
		}
		if again := f.gw.SSHSessionSend(context.Background(), SSHSessionSendInput{Handle: out.Handle, Text: "x"}); !strings.Contains(again.Text, "already ended") {
			t.Errorf("a send after the end: %s; want it refused", again.Text)
		}
	})
	for _, tc := range []struct {
		name, program, need string
		steps               []SSHSessionSendInput
	}{
		{"python REPL", "python3 -q", "python3", []SSHSessionSendInput{
			{WaitFor: `>>> $`},
			{Text: "print(6*7)", Keys: []string{"Enter"}, WaitFor: `(?m)^42$`},
			{Keys: []string{"Ctrl-D"}},
		}},
		{"bc", "bc -q", "bc", []SSHSessionSendInput{
			{Text: "6*7", Keys: []string{"Enter"}, WaitFor: `(?m)^42$`},
			{Text: "quit", Keys: []string{"Enter"}},
		}},
		{"less", "seq 1 500 > /tmp/actiongw-less.txt && less /tmp/actiongw-less.txt", "less", []SSHSessionSendInput{
			{WaitFor: `(?m)^1\n2\n3$`},
			{Keys: []string{"PageDown"}, WaitFor: `(?m)^30$`},
			{Text: "q"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := exec.LookPath(tc.need); err != nil {
				testenv.Missing(t, tc.need, "install it (apt-get install "+tc.need+")")
			}
			out := f.start(t, SSHSessionStartInput{Command: tc.program})
			var last *SSHSessionOutput
			for _, step := range tc.steps {
				step.Handle = out.Handle
				last = f.send(t, step)
			}
			_ = last
			r := f.gw.ActionStatus(context.Background(), ActionStatusInput{Handle: out.Handle, WaitS: ptr(30.0)}, nil)
			fin, ok := r.Structured.(*SSHSessionOutput)
			if !ok || fin.Status != StatusExited || fin.RemoteStopped == nil || !*fin.RemoteStopped {
				t.Fatalf("%s at its end: %s; want it exited, its processes verified gone", tc.name, r.Text)
			}
			if tc.name == "less" && fin.Screen.AltScreen {
				t.Errorf("the screen less left: %+v; want the alternate screen left", fin.Screen)
			}
		})
	}
	t.Run("secret at a prompt", func(t *testing.T) {
		out := f.start(t, SSHSessionStartInput{Command: "bash"})
		sum := sha256.Sum256([]byte(typedSecret))
		f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: `read -s -p 'Password: ' pw; echo; [ "$(printf %s "$pw" | sha256sum | cut -c1-16)" = ` + hex.EncodeToString(sum[:8]) + ` ] && echo right-password`, Keys: []string{"Enter"}, WaitFor: `Password: $`})
		got := f.send(t, SSHSessionSendInput{Handle: out.Handle, Secret: "enable", Keys: []string{"Enter"}, WaitFor: `right-password`})
		// And echoed back, whole and a character at a time with codes
		// between: redacted everywhere.
		got = f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: `echo "$pw"; for c in $(echo "$pw" | sed 's/./& /g'); do printf '%s\033[0m' "$c"; sleep 0.01; done; echo; echo echoed`, Keys: []string{"Enter"}, WaitFor: `(?m)^echoed$`})
		end := f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle})
		fin := end.Structured.(*SSHSessionOutput)
		read := f.gw.ReadOutput(context.Background(), ReadOutputInput{Handle: out.Handle, Stream: "terminal"})
		rec := f.gw.ReadOutput(context.Background(), ReadOutputInput{Handle: out.Handle, Stream: "recording"})
		for what, text := range map[string]string{"send": fmt.Sprint(got.Screen.Rows, got.Output), "end": end.Text + structured(t, end),
			"transcript": structured(t, read), "recording": structured(t, rec), "audit": readSessionAudit(t, f)} {
			if strings.Contains(text, typedSecret) || strings.Contains(text, "Zq8-Pa55") {
				t.Errorf("the %s shows the typed secret: %s", what, text)
			}
		}
		if !strings.Contains(readSessionAudit(t, f), `"secret":"enable"`) {
			t.Errorf("the audit log names no typed secret")
		}
		_ = fin
	})
}

func readSessionAudit(t *testing.T, f *sessionFixture) string {
	return readAudit(t, &fixture{cfg: f.cfg})
}

// What a prompt-injected agent could try with a session.
func TestSessionHostile(t *testing.T) {
	f := newSessionFixture(t, sshtest.Options{}, "")
	ctx := context.Background()
	t.Run("target without allow_sessions", func(t *testing.T) {
		r := f.gw.SSHSessionStart(ctx, SSHSessionStartInput{Target: "plain"}, nil)
		if !r.IsError || !strings.Contains(r.Text, "allow_sessions") {
			t.Fatalf("a session on plain: %s; want it denied", r.Text)
		}
		if !strings.Contains(readSessionAudit(t, f), `"rule":"allow_sessions"`) {
			t.Error("the denial is not in the audit log")
		}
	})
	out := f.start(t, SSHSessionStartInput{})
	// Wait for the login shell's prompt: text typed before it is echoed by
	// the tty first, and the shell's "$ " then leads the command's output
	// on its row, so an anchored wait_for below would never match.
	f.send(t, SSHSessionSendInput{Handle: out.Handle, WaitFor: `(?m)^\$ ?$`})
	t.Run("secret not in allow_secret_input", func(t *testing.T) {
		for _, name := range []string{"other", "box-key", "missing"} {
			r := f.gw.SSHSessionSend(ctx, SSHSessionSendInput{Handle: out.Handle, Secret: name, Keys: []string{"Enter"}})
			if !r.IsError || !strings.Contains(r.Text, "allow_secret_input") {
				t.Errorf("typing %s: %s; want it refused", name, r.Text)
			}
		}
	})
	t.Run("escape sequences for the person's terminal", func(t *testing.T) {
		evil := `printf '\033]0;pwned\007\033[6n\033[c\033]52;c;ZXZpbA==\007'; echo done-evil`
		got := f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: evil, Keys: []string{"Enter"}, WaitFor: `(?m)^done-evil$`})
		for _, text := range append(got.Screen.Rows, got.Output) {
			if strings.ContainsRune(text, 0x1b) || strings.ContainsRune(text, 0x07) {
				t.Errorf("a row or the output holds a terminal code: %q", text)
			}
		}
	})
	t.Run("pattern", func(t *testing.T) {
		start := time.Now()
		r := f.gw.SSHSessionSend(ctx, SSHSessionSendInput{Handle: out.Handle, WaitFor: `(a+)+$|(x*)*y{1000}`, WaitS: ptr(1.0)})
		got, ok := r.Structured.(*SSHSessionOutput)
		if !ok || got.Matched == nil || *got.Matched {
			t.Fatalf("a pattern that cannot match: %s", r.Text)
		}
		if took := time.Since(start); took > 30*time.Second {
			t.Errorf("the wait took %v; wait_s was 1", took)
		}
		if r := f.gw.SSHSessionSend(ctx, SSHSessionSendInput{Handle: out.Handle, WaitFor: `(`}); !r.IsError {
			t.Errorf("a pattern that does not compile: %s", r.Text)
		}
	})
	t.Run("unknown keys", func(t *testing.T) {
		r := f.gw.SSHSessionSend(ctx, SSHSessionSendInput{Handle: out.Handle, Text: "echo typed", Keys: []string{"Enter", "Hyper-X"}})
		if !r.IsError || !strings.Contains(r.Text, "unknown key") {
			t.Errorf("an unknown key: %s; want it refused, nothing typed", r.Text)
		}
	})
	t.Run("handle of another server", func(t *testing.T) {
		other := New(context.Background(), Options{Config: f.cfg, Secrets: secrets.Memory{"box-key": f.s.ClientKey}})
		defer other.Close()
		for _, h := range []string{out.Handle, "", "../../etc"} {
			r := other.SSHSessionSend(ctx, SSHSessionSendInput{Handle: h, Text: "echo hijacked", Keys: []string{"Enter"}})
			if !r.IsError || !strings.Contains(r.Text, "no terminal session") {
				t.Errorf("a send to %q from another server: %s; want it refused", h, r.Text)
			}
		}
		if r := f.gw.SSHSessionSend(ctx, SSHSessionSendInput{Handle: out.Handle}); strings.Contains(strings.Join(r.Structured.(*SSHSessionOutput).Screen.Rows, "\n"), "hijacked") {
			t.Error("another server typed into the session")
		}
	})
}

// A secret printed in two parts with a pause between, a pause that
// lasts until the test has looked (the remote program waits for a file):
// the typed value (which the guard holds, unseen), its base64 (which
// only the redactor knows) and the target's own key (a secret the target
// knows, never typed). No look during the pause and none after shows
// either part: the screen and the output show [HELD] where the redactor
// holds the part, and then the whole replaced. (The screen's stream once
// let what it held go after 300 ms of quiet, which showed the first
// part, and the second after it.)
func TestSessionSecretSplitByPause(t *testing.T) {
	f := newSessionFixture(t, sshtest.Options{}, "")
	dir := f.s.UserDir(t)
	if err := os.WriteFile(filepath.Join(dir, "key"), f.s.ClientKey, 0o644); err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	for _, line := range strings.Split(string(f.s.ClientKey), "\n") {
		if !strings.HasPrefix(line, "-----") {
			body.WriteString(line)
		}
	}
	// The session runs in dir, so that its random name (digits that may
	// begin a form of a secret, held) is not on the screen.
	wait := "until [ -e go-$n ]; do sleep 0.1; done"
	for n, tc := range []struct {
		name, program, form, atPause string
	}{
		{"typed", `printf '\nA:%s' "${x:0:9}"; ` + wait + `; printf '%s\n:Z\n' "${x:9}"`, typedSecret, "A:"},
		{"typed, as base64", `b=$(printf %s "$x" | base64 -w0); printf '\nA:%s' "${b:0:12}"; ` + wait + `; printf '%s\n:Z\n' "${b:12}"`,
			strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(typedSecret)), "="), "A:[HELD]"},
		// A whole key is held until six times its length followed it
		// (whether a longer form goes on): the filler decides it.
		{"the target's key", `printf '\nA:'; head -c 200 key; ` + wait + `; tail -c +201 key; printf '%4000s' | tr ' ' =; printf '\n:Z\n'`,
			body.String(), "A:[HELD]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := f.start(t, SSHSessionStartInput{Command: "bash --norc --noprofile", Cwd: dir})
			f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "read -rs x", Keys: []string{"Enter"}})
			f.send(t, SSHSessionSendInput{Handle: out.Handle, Secret: "enable", Keys: []string{"Enter"}})
			var looks []*SSHSessionOutput
			looks = append(looks, f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: fmt.Sprintf("n=%d; %s", n, tc.program), Keys: []string{"Enter"}, WaitFor: `(?m)^A:`}))
			// The output pauses now: a look after it paused for longer than
			// a send waits for quiet.
			looks = append(looks, f.send(t, SSHSessionSendInput{Handle: out.Handle, WaitS: ptr(1.0)}))
			if !slices.Contains(looks[1].Screen.Rows, tc.atPause) {
				t.Errorf("the screen at the pause:\n%s\nwant the row %q", looks[1].Screen, tc.atPause)
			}
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("go-%d", n)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			// The rest arrives before the next look: that look still
			// reports it, as output since the last send.
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
				tr := structured(t, f.gw.ReadOutput(context.Background(), ReadOutputInput{Handle: out.Handle, Stream: "terminal", From: "end", Offset: 200}))
				if strings.Contains(tr, `:Z\r\n`) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the transcript never showed the end: %s", tr)
				}
			}
			looks = append(looks, f.send(t, SSHSessionSendInput{Handle: out.Handle, WaitFor: `(?m)^:Z$`}))
			end := f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle})
			read := f.gw.ReadOutput(context.Background(), ReadOutputInput{Handle: out.Handle, Stream: "terminal"})
			texts := map[string]string{"transcript": structured(t, read), "end": end.Text}
			for i, l := range looks {
				texts[fmt.Sprintf("look %d's screen", i+1)] = strings.Join(l.Screen.Rows, "")
				texts[fmt.Sprintf("look %d's output", i+1)] = l.Output
			}
			for what, text := range texts {
				flat := strings.NewReplacer("\r", "", "\n", "", `\r`, "", `\n`, "").Replace(text)
				for i := 0; i+8 <= len(tc.form); i++ {
					if strings.Contains(flat, tc.form[i:i+8]) {
						t.Errorf("the %s shows %q of the secret: %s", what, tc.form[i:i+8], text)
						break
					}
				}
			}
			if last := looks[2]; !strings.Contains(last.Output, "[REDACTED:") {
				t.Errorf("the output after the pause: %s; want the secret replaced", last.Output)
			}
		})
	}
}

// Sessions are bounded per target and in all; one nobody types into
// ends after its idle timeout, its processes verified gone.
func TestSessionBounds(t *testing.T) {
	f := newSessionFixture(t, sshtest.Options{}, "")
	ctx := context.Background()
	t.Run("limits", func(t *testing.T) {
		var handles []string
		for range 2 {
			handles = append(handles, f.start(t, SSHSessionStartInput{WaitS: ptr(0.0)}).Handle)
		}
		if r := f.gw.SSHSessionStart(ctx, SSHSessionStartInput{Target: "term", WaitS: ptr(0.0)}, nil); !r.IsError || !strings.Contains(r.Text, "target's max_terminal_sessions") {
			t.Errorf("a third session on term: %s; want it refused by the target's limit", r.Text)
		}
		f.gw.CancelAction(ctx, CancelActionInput{Handle: handles[0]})
		f.start(t, SSHSessionStartInput{WaitS: ptr(0.0)})
		for _, h := range handles[1:] {
			f.gw.CancelAction(ctx, CancelActionInput{Handle: h})
		}
	})
	t.Run("idle", func(t *testing.T) {
		idle := newSessionFixture(t, sshtest.Options{}, "")
		idle.cfg.SSH["term"].SessionIdleTimeout = 2 * time.Second
		out := idle.start(t, SSHSessionStartInput{Command: "sleep 987021"})
		idle.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "x", WaitS: ptr(0.5)}) // restarts the timer
		r := idle.gw.ActionStatus(ctx, ActionStatusInput{Handle: out.Handle, WaitS: ptr(60.0)}, nil)
		fin, ok := r.Structured.(*SSHSessionOutput)
		if !ok || fin.Status != StatusTimeout || !strings.Contains(fin.Reason, "session_idle_timeout") || fin.RemoteStopped == nil || !*fin.RemoteStopped {
			t.Fatalf("an idle session: %s; want a timeout, its processes verified gone", r.Text)
		}
	})
}

// busybox's sh, and a server whose forced command runs instead of the
// wrapper (sshd's ForceCommand, as a shell-only device does): both work
// through a session; the second cannot be verified stopped, and says so.
func TestSessionShells(t *testing.T) {
	t.Run("busybox", func(t *testing.T) {
		if _, err := exec.LookPath("busybox"); err != nil {
			testenv.Missing(t, "busybox", "install it (apt-get install busybox)")
		}
		f := newSessionFixture(t, sshtest.Options{}, "")
		out := f.start(t, SSHSessionStartInput{Command: "busybox sh"})
		f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "echo bb-$((40+2))", Keys: []string{"Enter"}, WaitFor: `(?m)^bb-42$`})
		end := f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle})
		if fin := end.Structured.(*SSHSessionOutput); fin.RemoteStopped == nil || !*fin.RemoteStopped {
			t.Errorf("busybox sh cancelled: %s; want it verified gone", end.Text)
		}
	})
	t.Run("forced command", func(t *testing.T) {
		f := newSessionFixture(t, sshtest.Options{Config: []string{"ForceCommand /bin/sh -i"}}, "")
		out := f.start(t, SSHSessionStartInput{WaitS: ptr(10.0)})
		f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "echo forced-$((1+1))", Keys: []string{"Enter"}, WaitFor: `(?m)^forced-2$`})
		end := f.gw.CancelAction(context.Background(), CancelActionInput{Handle: out.Handle})
		if fin := end.Structured.(*SSHSessionOutput); fin.Status != StatusCancelled || fin.RemoteStopped == nil || *fin.RemoteStopped || !strings.Contains(fin.Reason, "not verified") {
			t.Errorf("the forced shell cancelled: %s; want cancelled and said not verified", end.Text)
		}
	})
}

// A program that floods 100 MB while nobody sends: the session drains it
// in bounded memory, keeps answering, and the screen shows its end.
func TestSessionFlood(t *testing.T) {
	f := newSessionFixture(t, sshtest.Options{}, "")
	out := f.start(t, SSHSessionStartInput{Command: "bash"})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f.send(t, SSHSessionSendInput{Handle: out.Handle, Text: "head -c 100000000 /dev/zero | tr '\\0' 'x' | fold -w 100; echo; echo flood-$((1+1))-done", Keys: []string{"Enter"}, WaitFor: `(?m)^flood-2-done$`, WaitS: ptr(300.0)})
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 64<<20 {
		t.Errorf("the heap grew by %d bytes over the flood; want it bounded", grew)
	}
	r := f.gw.ActionStatus(context.Background(), ActionStatusInput{Handle: out.Handle, WaitS: ptr(0.0)}, nil)
	if got := r.Structured.(*SSHSessionOutput); got.Terminal.Bytes < 100_000_000 {
		t.Errorf("the transcript counts %d bytes; want the whole flood", got.Terminal.Bytes)
	}
}
