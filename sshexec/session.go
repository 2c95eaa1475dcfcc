package sshexec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/ssh"
)

// session drives one "session" channel: it drains stdout and stderr into
// their writers until the channel closes, records the exit status, and
// picks the wrapper's process-group line out of the marker stream.
type session struct {
	ch          ssh.Channel
	readers     sync.WaitGroup // stdout, stderr, requests
	stdin       sync.WaitGroup // the stdin writer (see exec)
	streamsDone chan struct{}  // closed when both streams and the requests are drained
	done        chan struct{}  // closed when, after that, the stdin writer ended too

	mu     sync.Mutex
	code   *int
	signal string
	msg    string

	pgid        atomic.Int64
	armed       atomic.Bool // the wrapper's dead-man switch reads stdin for heartbeats
	pgidOnce    sync.Once
	pgidDecided chan struct{} // closed when pgid is known, or known to be missing
}

// pgidMarker starts the line that the wrapper writes before the command.
const pgidMarker = "\x1eactiongw-pgid "

// maxMarkerScan is how much of the marker stream is held back while looking
// for the wrapper's line: shell start-up files may print before it.
const maxMarkerScan = 4096

func startSession(ch ssh.Channel, reqs <-chan *ssh.Request, stdout, stderr, markerOn io.Writer) *session {
	s := &session{ch: ch, streamsDone: make(chan struct{}), done: make(chan struct{}), pgidDecided: make(chan struct{})}
	s.readers.Add(3)
	s.stdin.Add(1) // see exec
	go s.copy(stdout, ch, markerOn == stdout)
	go s.copy(stderr, ch.Stderr(), markerOn == stderr)
	go s.requests(reqs)
	go func() {
		s.readers.Wait()
		s.decidePGID(0)
		close(s.streamsDone)
		s.stdin.Wait()
		close(s.done)
	}()
	return s
}

type ptyRequestMsg struct {
	Term          string
	Columns, Rows uint32
	Width, Height uint32
	Modelist      string
}

// errRefused marks a request the server answered with a refusal: nothing
// was started. Any other error of exec leaves it unknown whether the
// command started.
var errRefused = errors.New("refused")

// exec starts command (a wrapped one: see wrapperScript), then sends stdin.
// When the wrapper armed its dead-man switch, a heartbeat byte follows
// every heartbeat interval until the session ends, and stdin is never
// closed; otherwise end of file follows stdin. It must be called once,
// right after startSession.
func (s *session) exec(t *Target, command string, stdin []byte, heartbeat time.Duration) error {
	if t.UsePTY {
		// No echo, so that stdin does not come back as output.
		var modes []byte
		modes = append(modes, ssh.ECHO)
		modes = binary.BigEndian.AppendUint32(modes, 0)
		modes = append(modes, 0) // TTY_OP_END
		ok, err := s.ch.SendRequest("pty-req", true, ssh.Marshal(&ptyRequestMsg{
			Term: "dumb", Columns: 200, Rows: 50, Modelist: string(modes)}))
		if err == nil && !ok {
			err = fmt.Errorf("server refused a pseudo-terminal: %w", errRefused)
		}
		if err != nil {
			s.stdin.Done()
			return fmt.Errorf("request pty: %w", err)
		}
	}
	ok, err := s.ch.SendRequest("exec", true, ssh.Marshal(&struct{ Command string }{command}))
	if err == nil && !ok {
		err = fmt.Errorf("server refused to run the command: %w", errRefused)
	}
	if err != nil {
		s.stdin.Done()
		return fmt.Errorf("start command: %w", err)
	}
	go func() {
		defer s.stdin.Done()
		// An error means the command exited or the channel closed before
		// reading everything, which its exit status reports.
		if _, err := s.ch.Write(stdin); err != nil {
			return
		}
		if s.waitPGID(heartbeat); !s.armed.Load() {
			s.ch.CloseWrite()
			return
		}
		tick := time.NewTicker(heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-s.streamsDone:
				return
			case <-tick.C:
				if _, err := s.ch.Write([]byte{'.'}); err != nil {
					return
				}
			}
		}
	}()
	return nil
}

func (s *session) requests(reqs <-chan *ssh.Request) {
	defer s.readers.Done()
	for req := range reqs {
		switch req.Type {
		case "exit-status":
			var m struct{ Status uint32 }
			if ssh.Unmarshal(req.Payload, &m) == nil {
				code := int(m.Status)
				s.mu.Lock()
				s.code = &code
				s.mu.Unlock()
			}
		case "exit-signal":
			var m struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}
			if ssh.Unmarshal(req.Payload, &m) == nil {
				s.mu.Lock()
				s.signal, s.msg = m.Signal, m.Error
				s.mu.Unlock()
			}
		}
		if req.WantReply {
			req.Reply(false, nil)
		}
	}
}

// copy drains r into w until end of file. With marker set, it removes the
// wrapper's process-group line.
func (s *session) copy(w io.Writer, r io.Reader, marker bool) {
	defer s.readers.Done()
	buf := make([]byte, 64<<10)
	var pending []byte
	for {
		n, err := r.Read(buf)
		if n > 0 {
			data := buf[:n]
			if marker {
				pending = append(pending, data...)
				var before, after []byte
				before, after, marker = s.scanMarker(pending)
				if len(before) > 0 {
					w.Write(before)
				}
				data = after
				if !marker {
					pending = nil
				}
			}
			if len(data) > 0 {
				w.Write(data)
			}
		}
		if err != nil {
			break
		}
	}
	if marker && len(pending) > 0 {
		w.Write(pending)
	}
}

// scanMarker looks for the wrapper's line in the held-back start of the
// marker stream. It returns the bytes to write (before and after the line)
// and whether to keep looking; while looking, nothing is written.
func (s *session) scanMarker(pending []byte) (before, after []byte, looking bool) {
	i := bytes.Index(pending, []byte(pgidMarker))
	if i < 0 {
		if len(pending) > maxMarkerScan {
			s.decidePGID(0)
			return nil, pending, false
		}
		return nil, nil, true
	}
	nl := bytes.IndexByte(pending[i:], '\n')
	if nl < 0 {
		if len(pending) > maxMarkerScan {
			s.decidePGID(0)
			return nil, pending, false
		}
		return nil, nil, true
	}
	fields := strings.Fields(string(pending[i+len(pgidMarker) : i+nl]))
	var pgid int64
	if len(fields) > 0 {
		pgid, _ = strconv.ParseInt(fields[0], 10, 64)
	}
	if pgid <= 1 {
		pgid = 0
	}
	s.armed.Store(len(fields) > 1 && fields[1] == "armed")
	s.decidePGID(pgid)
	return pending[:i], pending[i+nl+1:], false
}

func (s *session) decidePGID(pgid int64) {
	s.pgidOnce.Do(func() {
		s.pgid.Store(pgid)
		close(s.pgidDecided)
	})
}

// waitPGID returns the remote process group, waiting up to d for the
// wrapper's line; zero means unknown.
func (s *session) waitPGID(d time.Duration) int64 {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.pgidDecided:
	case <-t.C:
	}
	return s.pgid.Load()
}

// wait waits up to d for the session to end and reports whether it did.
func (s *session) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.done:
		return true
	case <-t.C:
		return false
	}
}

func (s *session) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// exit returns the exit status or signal; call it after done.
func (s *session) exit() (code *int, signal, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.code, s.signal, s.msg
}
