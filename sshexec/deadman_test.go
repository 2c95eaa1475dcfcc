//go:build unix

package sshexec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
)

// proxy forwards TCP connections to an sshd, so a test can take the
// network away from a client: cut stops forwarding but keeps every socket
// open (a network cut: nothing arrives and nothing closes), kill closes
// them (the server sees the connection end, as when the client process
// dies). Both also stop accepting, so the client cannot dial again and
// only the server side can stop the command.
type proxy struct {
	ln     net.Listener
	to     string
	mu     sync.Mutex
	conns  []net.Conn
	links  []chan struct{} // one a connection, closed to cut it
	cutAll bool
	closed bool
	limit  int // connections past this many are closed at once; 0: none
	wg     sync.WaitGroup
	// up counts the bytes forwarded from the client to the server;
	// upReached closes once they are upLimit or more (see afterUp).
	up        atomic.Int64
	upLimit   atomic.Int64
	upReached chan struct{}
	upOnce    sync.Once
}

func startProxy(t *testing.T, to string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, to: to, upReached: make(chan struct{})}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		p.kill()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// afterUp returns a channel that closes once n bytes or more have gone
// from the client to the server. It is called once, before they flow.
func (p *proxy) afterUp(n int64) <-chan struct{} {
	p.upLimit.Store(n)
	return p.upReached
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.full() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		cut, ok := p.track(c, s)
		if !ok {
			return
		}
		p.wg.Go(func() { p.pipe(s, c, &p.up, cut) })
		p.wg.Go(func() { p.pipe(c, s, nil, cut) })
	}
}

// track keeps a connection's two ends, and returns the channel that
// cuts it.
func (p *proxy) track(conns ...net.Conn) (<-chan struct{}, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			c.Close()
		}
		return nil, false
	}
	p.conns = append(p.conns, conns...)
	cut := make(chan struct{})
	if p.cutAll {
		close(cut)
	}
	p.links = append(p.links, cut)
	return cut, true
}

// refuseAfter makes the proxy close every connection after the first
// n at once, as a server past a limit of its own would.
func (p *proxy) refuseAfter(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.limit = n
}

func (p *proxy) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit > 0 && len(p.links) >= p.limit
}

// connections counts the connections made through the proxy.
func (p *proxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// pipe copies from src to dst until either closes, adding what it
// forwards to count if it is not nil; once cut closes it reads and
// drops, so neither end sees anything more and neither is closed.
func (p *proxy) pipe(dst, src net.Conn, count *atomic.Int64, cut <-chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-cut:
			if err != nil {
				return
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if count != nil {
				if total, limit := count.Add(int64(n)), p.upLimit.Load(); limit > 0 && total >= limit {
					p.upOnce.Do(func() { close(p.upReached) })
				}
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

// cut cuts the network: no new connection, and nothing more through
// any, none of which is closed.
func (p *proxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cutAll {
		p.cutAll = true
		for _, c := range p.links {
			p.cutLink(c)
		}
	}
}

// cutOne cuts the i-th connection alone, and takes new ones no more.
func (p *proxy) cutOne(i int) {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLink(p.links[i])
}

// cutLink closes c once; p.mu is held.
func (p *proxy) cutLink(c chan struct{}) {
	select {
	case <-c:
	default:
		close(c)
	}
}

func (p *proxy) kill() {
	p.cut()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
}

// viaProxy is target(s) reached through a new proxy, with the host key
// pinned (known_hosts names sshd's own port) and a short keepalive, so
// that heartbeats and their deadline are quick.
func viaProxy(t *testing.T, s *sshtest.Server) (*Target, *proxy) {
	px := startProxy(t, s.Addr())
	tg := target(s)
	tg.Name = "proxied"
	tg.Port = px.port()
	tg.HostKey, tg.KnownHostsPath = s.Fingerprint(), ""
	tg.Keepalive = time.Second
	return tg, px
}

// startRemote starts req's command in dir (it must write its pid to the
// file "pid" there, as `echo "$$" > pid` does) and returns once it runs,
// with the pid and a channel that gets Run's outcome.
func startRemote(t *testing.T, p *Pool, tg *Target, dir string, req Request) (int, <-chan error) {
	t.Helper()
	done := make(chan error, 1)
	req.Command = "cd " + dir + " || exit 1\n" + req.Command
	req.Stdout, req.Stderr = io.Discard, io.Discard
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := p.Run(ctx, tg, req)
		done <- err
	}()
	return sshtest.ReadPID(t, filepath.Join(dir, "pid"), 20*time.Second), done
}

// loginShells are the login shells the stop tests run the wrapper in:
// sshtest's default account (/bin/sh: dash on Debian) and bash, the
// shell of most real targets, which handles a session's end its own way.
var loginShells = []struct{ name, shell string }{{"sh", ""}, {"bash", "/bin/bash"}}

// clientLosses are the ways the network takes a client away: closing
// its connection, or cutting it (nothing arrives and nothing closes).
var clientLosses = []struct {
	name string
	drop func(*proxy)
}{
	{"connection closed", (*proxy).kill},
	{"network cut", (*proxy).cut},
}

// TestDeadManSwitch takes the network away from a client while a silent
// and a noisy command run (the noisy one, which a closed session ends with
// a PIPE, leaves a process outside its group), one that leaves more stdin
// unread than a pipe holds, and one whose call sets IFS to the digits
// (which, set before the watcher started, split its pids apart, so that
// its kills killed nothing) and which leaves a process outside its group,
// in both ways it can go, with the client unable to reconnect, under each
// login shell: only the remote side can stop the commands, and it must,
// within its heartbeat deadline.
func TestDeadManSwitch(t *testing.T) {
	for _, sh := range loginShells {
		t.Run(sh.name, func(t *testing.T) { testDeadManSwitch(t, sh.shell) })
	}
}

func testDeadManSwitch(t *testing.T, shell string) {
	s := sshtest.Start(t, sshtest.Options{Shell: shell})
	for _, tc := range clientLosses {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t)
			tg, px := viaProxy(t, s)
			silentDir, noisyDir, unreadDir, ifsDir := s.UserDir(t), s.UserDir(t), s.UserDir(t), s.UserDir(t)
			silent, silentDone := startRemote(t, p, tg, silentDir, Request{Command: `echo "$$" > pid; sleep 1000`})
			noisy, noisyDone := startRemote(t, p, tg, noisyDir, Request{Command: `setsid sleep 1000 & echo "$!" > escapee; echo "$$" > pid; while :; do echo noise; done`})
			noisyEscapee := sshtest.ReadPID(t, filepath.Join(noisyDir, "escapee"), 20*time.Second)
			unread, unreadDone := startRemote(t, p, tg, unreadDir, Request{Command: `echo "$$" > pid; exec sleep 1000`, Stdin: bytes.Repeat([]byte("x"), 1<<20)})
			ifs, ifsDone := startRemote(t, p, tg, ifsDir, Request{Env: map[string]string{"IFS": "0123456789"},
				Command: `setsid sleep 1000 & echo "$!" > escapee; echo "$$" > pid; sleep 1000`})
			escapee := sshtest.ReadPID(t, filepath.Join(ifsDir, "escapee"), 20*time.Second)
			tc.drop(px)
			// The client notices too (its keepalive, or the closed
			// socket); what matters is the remote side.
			for _, d := range []<-chan error{silentDone, noisyDone, unreadDone, ifsDone} {
				<-d
			}
			for name, pid := range map[string]int{"silent": silent, "noisy": noisy, "noisy's escapee": noisyEscapee, "stdin unread": unread, "IFS of digits": ifs, "IFS's escapee": escapee} {
				if !sshtest.WaitGone(pid, 30*time.Second) {
					t.Errorf("%s command %d still runs on the target after the client lost it", name, pid)
				}
			}
		})
	}
}

// TestDeadManStdinAllOrNothing: a client lost while it sends a command's
// stdin (here after 4 MiB of 64), by a closed connection or a network
// cut, must not hand the command the part that arrived, as a script cut
// mid-line would run its cut last line: the command gets no byte of it,
// and is stopped within the heartbeat deadline, not when TCP gives up.
func TestDeadManStdinAllOrNothing(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	for _, tc := range clientLosses {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t)
			tg, px := viaProxy(t, s)
			dir := s.UserDir(t)
			sent := px.afterUp(4 << 20)
			pid, done := startRemote(t, p, tg, dir, Request{Command: `echo "$$" > pid; cat > got; echo ran > after`, Stdin: bytes.Repeat([]byte("x"), 64<<20)})
			select {
			case <-sent:
			case <-time.After(60 * time.Second):
				t.Fatalf("only %d bytes of stdin went through the proxy in 60 s", px.up.Load())
			}
			tc.drop(px)
			<-done
			if !sshtest.WaitGone(pid, 30*time.Second) {
				t.Fatalf("command %d still runs after the client was lost", pid)
			}
			if got, err := os.ReadFile(filepath.Join(dir, "got")); err != nil || len(got) != 0 {
				t.Errorf("the command's stdin: %d bytes, %v; want none of the part that arrived", len(got), err)
			}
			if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
				t.Errorf("the command went on past its stdin; want it stopped")
			}
		})
	}
}

// TestDeadManHeartbeat runs a command for longer than the heartbeat
// deadline: the heartbeats keep it alive and it ends by itself.
func TestDeadManHeartbeat(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg, _ := viaProxy(t, s)
	d := heartbeatDeadline(tg.Keepalive)
	out, err := runCmd(t, p, tg, fmt.Sprintf("read line; sleep %d; echo \"$line\" done", int(d.Seconds())+2))
	if err != nil || out.res.Status != StatusExited || *out.res.ExitCode != 0 || out.stdout != " done\n" {
		t.Fatalf("got %+v, stdout %q, %v; want exited 0 after the deadline, and stdin at end of file", out.res, out.stdout, err)
	}
	// With stdin, which goes through a FIFO while the heartbeats follow it.
	var stdout syncbuf.Buffer
	res, err := p.Run(context.Background(), tg, Request{Stdin: []byte("a line\n"), Stdout: &stdout,
		Command: fmt.Sprintf("wc -l; sleep %d; cat; echo done", int(d.Seconds())+2)})
	if err != nil || res.Status != StatusExited || strings.Fields(stdout.String())[0] != "1" || !strings.HasSuffix(stdout.String(), "done\n") {
		t.Fatalf("with stdin: got %+v, stdout %q, %v; want the line counted, end of file, exited 0", res, stdout.String(), err)
	}
}

// TestStopEscapees stops commands whose processes left the process group
// or the session: remote_stopped is true only when they are gone too.
func TestStopEscapees(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	tg := target(s)
	for _, tc := range []struct{ name, command string }{
		{"setsid", "setsid sleep 4003 & echo $! > pid; echo started; sleep 1000"},
		{"new group", "(set -m; sleep 4004 & echo $! > pid; wait) & wait"},
		{"double fork", "( (sleep 4005 & echo $! > pid) & ) ; sleep 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := s.UserDir(t)
			var stdout syncbuf.Buffer
			type result struct {
				res *Result
				err error
			}
			done := make(chan result, 1)
			go func() {
				// The timeout counts from the command's start (Lease.Run), not
				// from a dial on a loaded machine, which could use it all.
				l, err := p.Acquire(context.Background(), tg, forever)
				if err != nil {
					done <- result{nil, err}
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				res, err := l.Run(ctx, Request{Command: "cd " + dir + " || exit 1\n" + tc.command, Stdout: &stdout})
				done <- result{res, err}
			}()
			pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 20*time.Second)
			r := <-done
			if r.err != nil || r.res.Status != StatusTimeout {
				t.Fatalf("got %+v, %v; want a timeout", r.res, r.err)
			}
			if r.res.RemoteStopped == nil || !*r.res.RemoteStopped {
				t.Errorf("remote_stopped %v (%s); want true", r.res.RemoteStopped, r.res.Unverified)
			}
			if !sshtest.WaitGone(pid, 10*time.Second) {
				t.Errorf("process %d that left the command's group still runs, remote_stopped %v", pid, *r.res.RemoteStopped)
			}
		})
	}
}

// TestKillScriptRemovesFIFO: the stop removes the FIFO a wrapper stopped
// early left in $TMPDIR, and nothing else there.
func TestKillScriptRemovesFIFO(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir, id := t.TempDir(), newRunID()
	fifo, other := filepath.Join(dir, "actiongw-"+id+".in"), filepath.Join(dir, "actiongw-"+newRunID()+".in")
	for _, p := range []string{fifo, other} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A process group that does not exist: only the removal has work.
	cmd := exec.Command(sh, "-c", cleanupScript(id)+killScript("KILL", wrapperInfo{pgid: 999999999}, id))
	cmd.Env = append(os.Environ(), "TMPDIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("killScript: %v: %s", err, out)
	}
	if _, err := os.Lstat(fifo); !os.IsNotExist(err) {
		t.Errorf("the run's FIFO after the stop: %v; want it removed", err)
	}
	if _, err := os.Lstat(other); err != nil {
		t.Errorf("another run's FIFO after the stop: %v; want it kept", err)
	}
}

// TestAliveScriptCannotList runs the check where neither /proc's
// environments nor ps can be read: it must say so (3), not "gone" (1).
func TestAliveScriptCannotList(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	cmd := exec.Command(sh, "-c", aliveScript(wrapperInfo{pgid: int64(os.Getpid())}, newRunID(), false))
	cmd.Env = []string{"PATH=" + t.TempDir()} // no grep, no ps, no awk
	err = cmd.Run()
	var code int
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	if code != 3 {
		t.Errorf("aliveScript without grep and ps: exit %d (%v); want 3 (cannot verify)", code, err)
	}
}

// TestWrapperQuoting runs commands with every quote and shell metacharacter
// through the wrapper on a real sshd: they run exactly as given.
func TestWrapperQuoting(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := newPool(t)
	for _, arg := range []string{`'`, `"`, `$HOME`, "a\nb", `\`, "`id`", `$(id)`, `;`, `--`, "@ID@ @N@ @CMD@"} {
		out, err := runCmd(t, p, target(s), "printf '%s' "+shellQuote(arg))
		if err != nil || out.stdout != arg {
			t.Errorf("printf %q: got %q, %v", arg, out.stdout, err)
		}
	}
	if out, err := runCmd(t, p, target(s), `printf '%s' "$ACTIONGW_RUN"`); err != nil || len(out.stdout) != len(newRunID()) || strings.Trim(out.stdout, "abcdefghijklmnopqrstuvwxyz234567") != "" {
		t.Errorf("ACTIONGW_RUN in the command's environment: %q, %v; want a run id", out.stdout, err)
	}
}

// TestDeadManDisarmed: a command that ends by itself disarms the switch,
// so what it leaves running on purpose survives the end of the session and
// of the connection.
func TestDeadManDisarmed(t *testing.T) {
	s := sshtest.Start(t, sshtest.Options{})
	p := NewPool(testLogger())
	tg, _ := viaProxy(t, s) // a short heartbeat deadline
	dir := s.UserDir(t)
	out, err := runCmd(t, p, tg, "cd "+dir+" || exit 1\nsleep 1000 >/dev/null 2>&1 </dev/null & echo $! > pid")
	if err != nil || out.res.Status != StatusExited {
		t.Fatalf("got %+v, %v", out.res, err)
	}
	pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 10*time.Second)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := p.Close(); err != nil { // the session and the connection end
		t.Fatal(err)
	}
	// An armed switch would fire at once when the connection ends, or at
	// the latest when its heartbeat deadline passes.
	if sshtest.WaitGone(pid, heartbeatDeadline(tg.Keepalive)+2*time.Second) {
		t.Errorf("the background process %d a finished command left was killed", pid)
	}
}

// TestWrapNamesItsFIFO: every placeholder of the wrapper is replaced, the
// FIFO's name included: each run's FIFO is its own, so that a file left at
// another run's name does not disarm the switch. What the call gives is
// kept byte for byte, placeholders and all (TestWrapperQuoting runs a
// command with them).
func TestWrapNamesItsFIFO(t *testing.T) {
	const id = "runid"
	script := wrap(&Request{Command: "true", Stdin: []byte("x"), Env: map[string]string{"V": "@N@ @ID@"}}, id, armedStdin, 5*time.Second, time.Second, false)
	given := strings.Count(script, "@ID@") + strings.Count(script, "@N@")
	if given != 2 || !strings.Contains(script, "/actiongw-"+id+".in") {
		t.Errorf("got %d placeholders left (want the call's 2), FIFO named for the run: %v; script:\n%s", given, strings.Contains(script, "/actiongw-"+id+".in"), script)
	}
}
