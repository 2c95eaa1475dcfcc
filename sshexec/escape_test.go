//go:build linux

package sshexec

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/internal/testkit/syncbuf"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// prctlSyscall is prctl's system call number on this machine, for the
// escapees' perl; 0 where the tests do not know it.
func prctlSyscall() int {
	switch runtime.GOARCH {
	case "amd64":
		return 157
	case "arm64", "riscv64", "loong64":
		return 167
	case "386", "arm", "s390x":
		return 172
	case "ppc64", "ppc64le":
		return 171
	}
	return 0
}

// escapee is a process a hostile command leaves behind, made so that
// the old checks (its process group, its run id in /proc/PID/environ) do
// not see it. Its command writes its pid to the file "pid" in the
// current directory.
type escapee struct {
	name    string
	command string // @PRCTL@ is prctl's syscall number
}

// script is e's command for this machine.
func (e escapee) script() string {
	return strings.ReplaceAll(e.command, "@PRCTL@", fmt.Sprint(prctlSyscall()))
}

// escapees are the kinds the review found: a new session with a cleared
// environment, a non-dumpable process (its environ unreadable to its
// user), one that rewrote its arguments over its environment (as
// setproctitle daemons do), a setsid'd, double-forked, non-dumpable,
// renamed daemon, and ssh-agent, which is all of these by itself.
var escapees = []escapee{
	{"setsid, environment cleared", `setsid env -i /bin/sh -c 'echo $$ > pid; exec /bin/sleep 4101' &`},
	{"setsid, non-dumpable", `setsid perl -e 'syscall(@PRCTL@, 4, 0, 0, 0, 0) == 0 or die "prctl: $!"; open my $f, ">", "pid" or die; print $f $$; close $f; sleep 4102' &`},
	{"setsid, environment rewritten", `setsid perl -e '$0 = "x" x 4000; open my $f, ">", "pid" or die; print $f $$; close $f; sleep 4103' &`},
	{"double-forked non-dumpable daemon", `setsid -f perl -e 'fork and exit; syscall(@PRCTL@, 4, 0, 0, 0, 0) == 0 or die "prctl: $!"; $0 = "daemon" . " " x 4000; open my $f, ">", "pid" or die; print $f $$; close $f; sleep 4104' </dev/null >/dev/null 2>&1`},
	{"ssh-agent", `eval "$(ssh-agent -s -a "$PWD/agent.sock")" >/dev/null && echo "$SSH_AGENT_PID" > pid`},
}

// requireEscapees ends t unless the escapees can be made here: perl,
// setsid and ssh-agent on the target (this machine), and prctl's number.
func requireEscapees(t *testing.T) {
	t.Helper()
	if prctlSyscall() == 0 {
		t.Skipf("prctl's syscall number on %s is not known to the test", runtime.GOARCH)
	}
	for _, tool := range []string{"perl", "setsid", "ssh-agent"} {
		if _, err := os.Stat("/usr/bin/" + tool); err != nil {
			testenv.Missing(t, tool, "apt-get install perl util-linux openssh-client, "+testenv.Setup)
		}
	}
}

// escapeeCommand runs e in dir, then something that keeps the command
// running (rest).
func escapeeCommand(e escapee, dir, rest string) string {
	return "cd " + dir + " || exit 1\n" + e.script() + "\n" + rest
}

// leftBehind waits for the escapee's pid file in dir and returns the pid;
// whatever the outcome, the process is killed when the test ends.
func leftBehind(t *testing.T, dir string) int {
	t.Helper()
	pid := sshtest.ReadPID(t, filepath.Join(dir, "pid"), 30*time.Second)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

// TestStopHostileEscapees stops, by cancel and by timeout, with signals
// and from a second session, and on a pseudo-terminal, commands that
// leave each kind of escapee behind: remote_stopped must be true, and the
// escapee gone.
func TestStopHostileEscapees(t *testing.T) {
	requireEscapees(t)
	for _, sh := range loginShells {
		t.Run(sh.name, func(t *testing.T) { testStopHostileEscapees(t, sh.shell) })
	}
}

func testStopHostileEscapees(t *testing.T, shell string) {
	s := sshtest.Start(t, sshtest.Options{Shell: shell})
	p := newPool(t)
	for _, stop := range []struct {
		name string
		mode StopMode
		pty  bool
	}{{"signal", StopSignal, false}, {"wrapper", StopWrapper, false}, {"pty", StopWrapper, true}} {
		for _, how := range []string{"cancel", "timeout"} {
			for _, e := range escapees {
				t.Run(stop.name+"/"+how+"/"+e.name, func(t *testing.T) {
					if stop.pty {
						s.RequirePTY(t)
					}
					tg := target(s)
					tg.StopMode, tg.UsePTY = stop.mode, stop.pty
					dir := s.UserDir(t)
					timeout := time.Minute
					if how == "timeout" {
						timeout = 4 * time.Second
					}
					ctx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
					defer cancelTimeout()
					ctx, cancel := context.WithCancelCause(ctx)
					defer cancel(nil)
					req := Request{Command: escapeeCommand(e, dir, "echo started; sleep 1000")}
					var stdout syncbuf.Buffer
					req.Stdout, req.Stderr = &stdout, &stdout
					done := make(chan *Result, 1)
					go func() {
						res, err := p.Run(ctx, tg, req)
						if err != nil {
							t.Errorf("Run: %v", err)
						}
						done <- res
					}()
					pid := leftBehind(t, dir)
					if how == "cancel" {
						cancel(errTestCancel)
					}
					var res *Result
					select {
					case res = <-done:
					case <-time.After(60 * time.Second):
						t.Fatal("Run did not return within 60 s")
					}
					if res == nil {
						return
					}
					if want := map[string]Status{"cancel": StatusCancelled, "timeout": StatusTimeout}[how]; res.Status != want {
						t.Errorf("status: got %q; want %q (reason %q)", res.Status, want, res.Reason)
					}
					if res.RemoteStopped == nil || !*res.RemoteStopped {
						t.Errorf("remote_stopped: got %v (%s); want true", res.RemoteStopped, res.Unverified)
					}
					if !sshtest.WaitGone(pid, 10*time.Second) {
						t.Errorf("escapee %d (%s) still runs; remote_stopped %v", pid, proc.Name(pid), res.RemoteStopped != nil && *res.RemoteStopped)
					}
					if strings.Contains(stdout.String(), "\x1eactiongw-") {
						t.Errorf("a marker line reached the output: %q", stdout.String())
					}
				})
			}
		}
	}
}

// TestDeadManHostileEscapees takes the network away from a client while
// commands that left each kind of escapee run, with and without a
// pseudo-terminal (the kernel hangs the session up when sshd closes it):
// the escapees must be gone, stopped by the remote side alone.
func TestDeadManHostileEscapees(t *testing.T) {
	requireEscapees(t)
	for _, sh := range loginShells {
		t.Run(sh.name, func(t *testing.T) { testDeadManHostileEscapees(t, sh.shell) })
	}
}

func testDeadManHostileEscapees(t *testing.T, shell string) {
	s := sshtest.Start(t, sshtest.Options{Shell: shell})
	for _, loss := range clientLosses {
		for _, pty := range []bool{false, true} {
			name := loss.name
			if pty {
				name += "/pty"
			}
			t.Run(name, func(t *testing.T) {
				if pty {
					s.RequirePTY(t)
					if loss.name == "network cut" {
						t.Skip("a pseudo-terminal has no dead-man switch: a cut network leaves sshd's session, and the terminal, open until TCP gives up")
					}
				}
				p := newPool(t)
				tg, px := viaProxy(t, s)
				tg.UsePTY = pty
				var pids []int
				var dones []<-chan error
				for _, e := range escapees {
					// startRemote waits for the pid file, the escapee's.
					dir := s.UserDir(t)
					_, done := startRemote(t, p, tg, dir, Request{Command: e.script() + "\nsleep 1000"})
					dones = append(dones, done)
					pids = append(pids, leftBehind(t, dir))
				}
				loss.drop(px)
				for _, d := range dones {
					<-d
				}
				for i, pid := range pids {
					if !sshtest.WaitGone(pid, 60*time.Second) {
						t.Errorf("%s %d (%s) still runs on the target after the client was lost", escapees[i].name, pid, proc.Name(pid))
					}
				}
			})
		}
	}
}

// TestSudoHostileEscapees: under sudo, root's escapees are stopped on a
// cancel, and by the dead-man switch when the client is lost, and a
// cancelled or lost sudo call leaves nothing in $TMPDIR (sudo's askpass
// directory, the stdin FIFO).
func TestSudoHostileEscapees(t *testing.T) {
	requireEscapees(t)
	for _, sh := range loginShells {
		t.Run(sh.name, func(t *testing.T) { testSudoHostileEscapees(t, sh.shell) })
	}
}

func testSudoHostileEscapees(t *testing.T, shell string) {
	tmp, err := os.MkdirTemp("", "actiongw-sudo-tmp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o1777); err != nil {
		t.Fatal(err)
	}
	// The login's TMPDIR, where the wrapper and sudo's askpass put theirs.
	s := sshtest.Start(t, sshtest.Options{Config: []string{"SetEnv TMPDIR=" + tmp}})
	user, password := sshtest.EnableSudoShell(t, shell)
	p := newPool(t)
	tg := target(s)
	tg.User = user
	for _, e := range escapees {
		t.Run("cancel/"+e.name, func(t *testing.T) {
			dir := t.TempDir() // root's: the command runs as root
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan output, 1)
			go func() {
				done <- sudoRun(t, ctx, p, tg, Request{Sudo: true, SudoPassword: password, Stdin: []byte("unread stdin"),
					Command: escapeeCommand(e, dir, "sleep 1000")})
			}()
			pid := leftBehind(t, dir)
			cancel()
			r := <-done
			if r.res.Status != StatusCancelled || r.res.RemoteStopped == nil || !*r.res.RemoteStopped {
				t.Errorf("got %+v (stderr %q); want cancelled, verified stopped", r.res, r.stderr)
			}
			if !sshtest.WaitGone(pid, 10*time.Second) {
				t.Errorf("root's escapee %d (%s) survived the stop", pid, proc.Name(pid))
			}
			if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) > 0 {
				t.Errorf("the cancelled sudo call left %q in its TMPDIR", left)
			}
		})
	}
	t.Run("dead-man", func(t *testing.T) {
		px := startProxy(t, s.Addr())
		ptg := *tg
		ptg.Name, ptg.Port = "proxied", px.port()
		ptg.HostKey, ptg.KnownHostsPath = s.Fingerprint(), ""
		ptg.Keepalive = time.Second
		pp := newPool(t)
		var pids []int
		var dones []chan output
		for _, e := range escapees {
			dir := t.TempDir()
			done := make(chan output, 1)
			dones = append(dones, done)
			go func() {
				done <- sudoRun(t, context.Background(), pp, &ptg, Request{Sudo: true, SudoPassword: password,
					Command: escapeeCommand(e, dir, "sleep 1000")})
			}()
			pids = append(pids, leftBehind(t, dir))
		}
		px.kill()
		for _, d := range dones {
			<-d
		}
		for i, pid := range pids {
			if !sshtest.WaitGone(pid, 60*time.Second) {
				t.Errorf("root's %s %d (%s) still runs after the client was lost", escapees[i].name, pid, proc.Name(pid))
			}
		}
		// The supervisor, the last to go, removes what the watcher (whose
		// sudo's askpass is there too) could not.
		var left []string
		if !testenv.Eventually(30*time.Second, func() bool { left, _ = filepath.Glob(filepath.Join(tmp, "*")); return len(left) == 0 }) {
			t.Errorf("the lost sudo calls left %q in their TMPDIR", left)
		}
	})
}

// censusUser is the account TestStopCensus logs in to.
const censusUser = "actiongw-census"

// TestStopCensus: on a host where the wrapper cannot become a subreaper
// (no perl, not Linux, busybox), a stop of a command that left an
// escapee behind is not verified, and the reason names the escapee; one
// that left nothing behind is.
func TestStopCensus(t *testing.T) {
	requireEscapees(t)
	testenv.Root(t, "the census runs as an account of its own")
	s := sshtest.Start(t, sshtest.Options{})
	// An account no other test logs in to: the census counts every process
	// of the login's uid that started during the command, and another
	// test's orphan would make it unverified, rightly.
	sshtest.EnsureUser(t, censusUser)
	p := newPool(t)
	tg := target(s)
	tg.User, tg.noSubreaper = censusUser, true
	userDir := func(t *testing.T) string { return s.UserDirOf(t, censusUser) }
	t.Run("nothing left behind", func(t *testing.T) {
		dir := userDir(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		done := make(chan *Result, 1)
		go func() {
			res, _ := p.Run(ctx, tg, Request{Command: "cd " + dir + " && sleep 1000 & echo $! > " + dir + "/pid; sleep 1000"})
			done <- res
		}()
		leftBehind(t, dir)
		cancel(errTestCancel)
		res := <-done
		if res == nil || res.RemoteStopped == nil || !*res.RemoteStopped {
			t.Errorf("got %+v; want remote_stopped true", res)
		}
	})
	for _, e := range escapees {
		t.Run(e.name, func(t *testing.T) {
			dir := userDir(t)
			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan *Result, 1)
			go func() {
				res, _ := p.Run(ctx, tg, Request{Command: escapeeCommand(e, dir, "sleep 1000")})
				done <- res
			}()
			pid := leftBehind(t, dir)
			cancel(errTestCancel)
			res := <-done
			if res == nil || res.RemoteStopped == nil {
				t.Fatalf("got %+v; want remote_stopped set", res)
			}
			t.Logf("remote_stopped %v: %s", *res.RemoteStopped, res.Unverified)
			if !sshtest.WaitGone(pid, 2*time.Second) {
				if *res.RemoteStopped {
					t.Errorf("remote_stopped true while escapee %d (%s) runs", pid, proc.Name(pid))
				}
				if want := fmt.Sprintf("pid %d (", pid); !strings.Contains(res.Unverified, want) {
					t.Errorf("reason %q; want it to name %s...)", res.Unverified, want)
				}
			}
		})
	}
}

// TestProcsCheck runs the control check (aliveScript) on this machine,
// with its tools and with busybox's, for a wrapper that is not a
// subreaper: a live escapee that renamed itself to look like another
// process's /proc line ("x)" and a newline in its comm) is still seen as
// the command's while the wrapper lives, and once the wrapper is gone
// (its orphans at pid 1), the census names it.
func TestProcsCheck(t *testing.T) {
	requireEscapees(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tools := range []string{"system", "busybox"} {
		t.Run(tools, func(t *testing.T) {
			env := os.Environ()
			if tools == "busybox" {
				env = []string{"PATH=" + busyboxPath(t)}
			}
			dir := t.TempDir()
			// The wrapper: an escapee in a session of its own whose comm
			// forges the start of a /proc line, then a wait.
			forged := fmt.Sprintf(`perl -e 'my $n = "x)\n1 (y) S 1 1 "; syscall(%d, 15, $n, 0, 0, 0) == 0 or die "prctl: $!"; open my $f, ">", "%s/pid" or die; print $f $$; close $f; sleep 4201'`, prctlSyscall(), dir)
			w := exec.Command(sh, "-c", "setsid "+forged+" </dev/null >/dev/null 2>&1 & exec sleep 4200")
			if err := w.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { w.Process.Kill(); w.Wait() })
			pid := leftBehind(t, dir)
			st, err := proc.StartTime(w.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			info := wrapperInfo{pid: int64(w.Process.Pid), pgid: int64(w.Process.Pid), start: fmt.Sprint(st)}
			check := func() (int, string) {
				cmd := exec.Command(sh, "-c", aliveScript(info, newRunID(), false))
				cmd.Env = env
				out, err := cmd.Output()
				return exitCode(err), string(out)
			}
			if code, out := check(); code != 0 || !strings.Contains(out, fmt.Sprintf("A\t%d\t", pid)) {
				t.Errorf("while the wrapper lives: exit %d, %q; want 0 and the escapee %d as the command's", code, out, pid)
			}
			w.Process.Kill()
			w.Wait()
			testenv.WaitFor(t, 30*time.Second, "the escapee reparented", func() bool { return proc.Parent(pid) != w.Process.Pid })
			code, out := check()
			if code != 4 || !strings.Contains(out, fmt.Sprintf("S\t%d\t", pid)) {
				t.Errorf("after the wrapper: exit %d, %q; want 4 and the escapee %d named", code, out, pid)
			}
		})
	}
}

// TestBodyLostItsOutput: a wrapper's shell that a PIPE ends (its output,
// the session, is gone: the client was lost) before the dead-man watcher
// fires is a stop for the supervisor, which otherwise took it for the
// command's own end and left an escapee that cleared its environment and
// left the group to pid 1.
func TestBodyLostItsOutput(t *testing.T) {
	requireEscapees(t)
	e := escapees[0]
	for _, sh := range loginShells {
		t.Run(sh.name, func(t *testing.T) {
			s := sshtest.Start(t, sshtest.Options{Shell: sh.shell})
			p := newPool(t)
			dir := s.UserDir(t)
			// Before, the escapee kept the session open, and the call with it.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := p.Run(ctx, target(s), Request{Command: escapeeCommand(e, dir, "while [ ! -s pid ]; do sleep 0.1; done; kill -PIPE $$; sleep 1000")})
			if err != nil {
				t.Fatal(err)
			}
			pid := leftBehind(t, dir)
			if !sshtest.WaitGone(pid, 60*time.Second) {
				t.Errorf("%s %d (%s) still runs after its wrapper's shell died of PIPE (result %+v)", e.name, pid, proc.Name(pid), res)
			}
		})
	}
}
