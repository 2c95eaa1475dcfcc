//go:build unix

package demo

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// handshakeTimeout bounds a client's SSH handshake.
const handshakeTimeout = 10 * time.Second

// pipeGrace is how long a stopped command's output pipes may stay open
// after its process group was killed: a process that left the group can
// hold them, and the session must end all the same.
const pipeGrace = time.Second

// sshServer is the sandbox's SSH server: one user, one client key, "exec"
// requests only.
type sshServer struct {
	ln     net.Listener
	config *ssh.ServerConfig
	log    *slog.Logger
	dir    string // working directory of commands

	wg     sync.WaitGroup // the accept loop and every connection
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// startSSH listens on a loopback port and serves user, authenticated by
// clientKey only.
func startSSH(hostKey ssh.Signer, user string, clientKey ssh.PublicKey, log *slog.Logger) (*sshServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo ssh server: %w", err)
	}
	want := clientKey.Marshal()
	config := &ssh.ServerConfig{
		// No PasswordCallback and no KeyboardInteractiveCallback: a public
		// key is the only method offered.
		PublicKeyCallback: func(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if meta.User() == user && subtle.ConstantTimeCompare(key.Marshal(), want) == 1 {
				return nil, nil
			}
			return nil, errors.New("key not accepted")
		},
		ServerVersion: "SSH-2.0-actiongw-demo",
	}
	config.AddHostKey(hostKey)
	dir, err := os.UserHomeDir()
	if err != nil {
		dir = "/"
	}
	s := &sshServer{ln: ln, config: config, log: log, dir: dir, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// addr is the address the server listens on.
func (s *sshServer) addr() *net.TCPAddr { return s.ln.Addr().(*net.TCPAddr) }

// close stops listening, closes every connection (which kills the commands
// still running) and waits for everything the server started.
func (s *sshServer) close() {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close()
	s.wg.Wait()
}

func (s *sshServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[nc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(nc)
	}
}

// serveConn runs one SSH connection until it ends, then waits for its
// sessions.
func (s *sshServer) serveConn(nc net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, nc)
		s.mu.Unlock()
		nc.Close()
	}()
	nc.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		s.log.Debug("demo ssh handshake failed", "remote", nc.RemoteAddr().String(), "error", err)
		return
	}
	nc.SetDeadline(time.Time{})
	defer conn.Close()
	var sessions sync.WaitGroup
	sessions.Add(1)
	go func() {
		defer sessions.Done()
		ssh.DiscardRequests(reqs) // keepalives get a failure reply, as OpenSSH gives
	}()
	for nch := range chans {
		if nch.ChannelType() != "session" {
			nch.Reject(ssh.UnknownChannelType, "the demo server opens session channels only")
			continue
		}
		ch, creqs, err := nch.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.session(ch, creqs)
		}()
	}
	// The connection ended: each session's requests have closed, so each
	// is stopping its command.
	sessions.Wait()
}

// session serves one session channel: one "exec", any number of
// "signal"s. When the client closes the channel, or the connection ends,
// the command's process group is killed.
func (s *sshServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	var p *process
	for req := range reqs {
		switch req.Type {
		case "exec":
			var m struct{ Command string }
			if p != nil || ssh.Unmarshal(req.Payload, &m) != nil {
				req.Reply(false, nil)
				continue
			}
			var err error
			p, err = s.start(m.Command)
			req.Reply(err == nil, nil)
			if err != nil {
				s.log.Warn("demo ssh: command did not start", "error", err)
				ch.Close()
				continue
			}
			// The reply goes first: output and the exit status follow it.
			p.serve(ch)
		case "signal":
			var m struct{ Signal string }
			ok := p != nil && ssh.Unmarshal(req.Payload, &m) == nil && p.signal(m.Signal) == nil
			if req.WantReply {
				req.Reply(ok, nil)
			}
		default:
			// pty-req, shell, env, subsystem: the sandbox runs commands
			// only, and refuses the rest as OpenSSH refuses what it
			// does not allow.
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}
	if p != nil {
		p.stop()
	}
}

// process is one running command and the goroutines that wire it to its
// channel.
type process struct {
	cmd            *exec.Cmd
	stdin          io.WriteCloser
	stdout, stderr io.ReadCloser
	log            *slog.Logger

	wg   sync.WaitGroup // stdin copy and the run goroutine
	done chan struct{}  // closed once the output is drained and the exit reported

	mu     sync.Mutex
	reaped bool // set before Wait: from then on the pgid may be reused
}

// start runs command with /bin/sh -c as a session leader, so that its
// process group id is its pid, as under sshd.
func (s *sshServer) start(command string) (*process, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	p := &process{cmd: cmd, log: s.log, done: make(chan struct{})}
	var err1, err2, err3 error
	p.stdin, err1 = cmd.StdinPipe()
	p.stdout, err2 = cmd.StdoutPipe()
	p.stderr, err3 = cmd.StderrPipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.log.Debug("demo ssh: command started", "pid", cmd.Process.Pid)
	return p, nil
}

// serve copies the channel into the command's stdin and its stdout and
// stderr into the channel; once both are drained it reaps the command and
// sends its exit status (or signal), then closes the channel.
func (p *process) serve(ch ssh.Channel) {
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		// Ends at the client's end of file, or when the channel closes.
		io.Copy(p.stdin, ch)
		p.stdin.Close()
	}()
	go func() {
		defer p.wg.Done()
		defer close(p.done)
		var drains sync.WaitGroup
		drains.Add(2)
		go func() { defer drains.Done(); drain(ch, p.stdout) }()
		go func() { defer drains.Done(); drain(ch.Stderr(), p.stderr) }()
		drains.Wait()
		p.mu.Lock()
		p.reaped = true
		p.mu.Unlock()
		typ, payload := exitRequest(p.cmd.Wait())
		if _, err := ch.SendRequest(typ, false, payload); err != nil {
			p.log.Debug("demo ssh: exit status not sent", "error", err)
		}
		ch.Close()
	}()
}

// drain copies r into w; once w fails (the channel is gone) it keeps
// reading, so the command is never blocked on a full pipe.
func drain(w io.Writer, r io.Reader) {
	if _, err := io.Copy(w, r); err != nil {
		io.Copy(io.Discard, r)
	}
}

// signal delivers the named signal to the command's process group.
func (p *process) signal(name string) error {
	sig, ok := signals[name]
	if !ok {
		return fmt.Errorf("unknown signal %q", name)
	}
	return p.kill(sig)
}

// kill sends sig to the process group while its leader is not yet reaped,
// when the group id cannot belong to anything else.
func (p *process) kill(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return errors.New("the command has ended")
	}
	return syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop kills the process group of a command whose channel closed and waits
// for its goroutines; output pipes held open by a process that left the
// group are closed after pipeGrace.
func (p *process) stop() {
	if err := p.kill(syscall.SIGKILL); err == nil {
		p.log.Debug("demo ssh: channel closed; killed the command's process group", "pgid", p.cmd.Process.Pid)
	}
	select {
	case <-p.done:
	case <-time.After(pipeGrace):
		p.stdout.Close()
		p.stderr.Close()
		<-p.done
	}
	p.wg.Wait()
}

// exitRequest is the channel request that reports how a command ended:
// "exit-signal" when a signal killed it, else "exit-status" (RFC 4254
// 6.10). A signal without an RFC name is reported as a shell reports it,
// status 128+n.
func exitRequest(err error) (string, []byte) {
	status := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		ws, _ := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			if name, ok := signalNames[ws.Signal()]; ok {
				return "exit-signal", ssh.Marshal(&struct {
					Signal     string
					CoreDumped bool
					Error      string
					Lang       string
				}{Signal: name, CoreDumped: ws.CoreDump()})
			}
			status = 128 + int(ws.Signal())
		} else {
			status = ee.ExitCode()
		}
	case err != nil:
		status = 255 // as OpenSSH's client reports a lost command
	}
	return "exit-status", ssh.Marshal(&struct{ Status uint32 }{uint32(status)})
}

// signals are the signal names of RFC 4254 section 6.10.
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE,
	"HUP": syscall.SIGHUP, "ILL": syscall.SIGILL, "INT": syscall.SIGINT,
	"KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE, "QUIT": syscall.SIGQUIT,
	"SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

var signalNames = func() map[syscall.Signal]string {
	m := make(map[syscall.Signal]string, len(signals))
	for name, sig := range signals {
		m[sig] = name
	}
	return m
}()
