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

	wrapper     wrapperInfo // set before pgidDecided closes
	armed       atomic.Bool // the wrapper's dead-man switch reads stdin for heartbeats
	pgidOnce    sync.Once
	pgidDecided chan struct{} // closed when the wrapper is known, or known to be missing
	reaped      atomic.Bool   // the supervisor's last line ended the marker stream
	disarm      chan struct{} // closed by disarmOnce: tell the watcher to stand down
	disarmOnce  sync.Once
}

// The marker lines: the supervisor's first (subMarker NONCE) and last
// (reapedMarker NONCE), and the wrapper's (pgidMarker ...) before the
// command.
const (
	pgidMarker   = "\x1eactiongw-pgid "
	subMarker    = "\x1eactiongw-sub "
	reapedMarker = "\x1eactiongw-reaped "
)

// maxMarkerScan is how much of the marker stream is held back while looking
// for the wrapper's line: shell start-up files may print before it.
const maxMarkerScan = 4096

func startSession(ch ssh.Channel, reqs <-chan *ssh.Request, stdout, stderr, markerOn io.Writer) *session {
	s := &session{ch: ch, streamsDone: make(chan struct{}), done: make(chan struct{}), pgidDecided: make(chan struct{}), disarm: make(chan struct{})}
	s.readers.Add(3)
	s.stdin.Add(1) // see exec
	go s.copy(stdout, ch, markerOn == stdout, 0)
	go s.copy(stderr, ch.Stderr(), markerOn == stderr, 0)
	s.start(reqs)
	return s
}

// start starts the goroutine that drains the requests and the one that
// closes streamsDone and done once the readers (three, added by the
// caller: the streams' and the requests') and the stdin writer ended.
func (s *session) start(reqs <-chan *ssh.Request) {
	go s.requests(reqs)
	go func() {
		s.readers.Wait()
		s.decide(wrapperInfo{})
		close(s.streamsDone)
		s.stdin.Wait()
		close(s.done)
	}()
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
		heartbeats(s.ch, heartbeat, s.streamsDone, s.disarm)
	}()
	return nil
}

// heartbeats writes a heartbeat (".") to a dead-man switch's stdin w
// every interval until end is closed or a write fails, or until disarm
// is closed, when it stands the switch down ("x").
func heartbeats(w io.Writer, interval time.Duration, end, disarm <-chan struct{}) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-end:
			return
		case <-disarm:
			w.Write([]byte{'x'})
			return
		case <-tick.C:
			if _, err := w.Write([]byte{'.'}); err != nil {
				return
			}
		}
	}
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

// copyBufs are copy's read buffers: two a command, 128 KiB of garbage
// each ssh_exec made before (12% of what serve allocated in the soak).
var copyBufs = sync.Pool{New: func() any { return new([64 << 10]byte) }}

// copy drains r into w until end of file. With marker set, it removes the
// wrapper's marker lines from the start and the supervisor's last line
// from the end. With giveUp too, it stops looking for the wrapper's line
// after that long and writes what it held back: on a terminal, whose
// server may run something else than the wrapper (a ForceCommand), the
// screen must not wait for a line that never comes.
func (s *session) copy(w io.Writer, r io.Reader, marker bool, giveUp time.Duration) {
	defer s.readers.Done()
	b := copyBufs.Get().(*[64 << 10]byte)
	defer copyBufs.Put(b)
	buf := b[:]
	var mu sync.Mutex // pending, marker and the writes to w, shared with the give-up timer
	var pending, held []byte
	tail := marker
	if marker && giveUp > 0 {
		t := time.AfterFunc(giveUp, func() {
			mu.Lock()
			defer mu.Unlock()
			if marker {
				marker = false
				s.decide(wrapperInfo{})
				if len(pending) > 0 {
					w.Write(pending)
				}
				pending = nil
			}
		})
		defer t.Stop()
	}
	for {
		n, err := r.Read(buf)
		mu.Lock()
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
			if tail && !marker && s.wrapper.nonce != "" && len(data) > 0 {
				// Held back: what might be the start of the last line.
				if len(held) > 0 {
					data = append(held, data...)
					held = nil
				}
				if k := bytes.LastIndexByte(data, 0x1e); k >= 0 && s.reapedLine(data[k:], true) {
					held = bytes.Clone(data[k:])
					data = data[:k]
				}
			}
			if len(data) > 0 {
				w.Write(data)
			}
		}
		mu.Unlock()
		if err != nil {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if marker && len(pending) > 0 {
		w.Write(pending)
	}
	marker = false
	if len(held) > 0 {
		if s.reapedLine(held, false) {
			s.reaped.Store(true)
		} else {
			w.Write(held)
		}
	}
}

// reapedLine reports whether b is the supervisor's last line (with a
// terminal's CRLF too), or with prefix the start of it.
func (s *session) reapedLine(b []byte, prefix bool) bool {
	line := reapedMarker + s.wrapper.nonce
	for _, end := range []string{"\n", "\r\n"} {
		if want := line + end; string(b) == want || prefix && len(b) < len(want) && strings.HasPrefix(want, string(b)) {
			return true
		}
	}
	return false
}

// scanMarker looks for the wrapper's line in the held-back start of the
// marker stream. It returns the bytes to write (before and after the line)
// and whether to keep looking; while looking, nothing is written.
func (s *session) scanMarker(pending []byte) (before, after []byte, looking bool) {
	i := bytes.Index(pending, []byte(pgidMarker))
	if i < 0 {
		if len(pending) > maxMarkerScan {
			s.decide(wrapperInfo{})
			return nil, pending, false
		}
		return nil, nil, true
	}
	nl := bytes.IndexByte(pending[i:], '\n')
	if nl < 0 {
		if len(pending) > maxMarkerScan {
			s.decide(wrapperInfo{})
			return nil, pending, false
		}
		return nil, nil, true
	}
	w := wrapperInfo{}
	fields := strings.Fields(string(pending[i+len(pgidMarker) : i+nl]))
	if len(fields) > 0 {
		w.pid, _ = strconv.ParseInt(fields[0], 10, 64)
	}
	if w.pid <= 1 {
		w.pid = 0
	}
	w.pgid = w.pid
	armed := false
	for _, f := range fields[min(1, len(fields)):] {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "armed":
			armed = v == "1"
		case "sub":
			w.sub = v == "1"
		case "group":
			if g, err := strconv.ParseInt(v, 10, 64); err == nil && g > 1 && w.pid != 0 {
				w.pgid = g
			}
		case "start":
			if _, err := strconv.ParseUint(v, 10, 64); err == nil {
				w.start = v
			}
		}
	}
	before = pending[:i]
	// The supervisor's first line comes before it (with sub=1 only).
	if j := bytes.Index(before, []byte(subMarker)); j >= 0 && w.sub {
		if e := bytes.IndexByte(before[j:], '\n'); e >= 0 {
			if f := strings.Fields(string(before[j+len(subMarker) : j+e])); len(f) == 1 {
				w.nonce = f[0]
			}
			before = append(before[:j:j], before[j+e+1:]...)
		}
	}
	if w.nonce == "" {
		w.sub = false // without its first line, its last cannot be told from a forgery
	}
	s.armed.Store(armed)
	s.decide(w)
	return before, pending[i+nl+1:], false
}

// decide records what the wrapper's marker said, once: a zero w when it
// is missing.
func (s *session) decide(w wrapperInfo) {
	s.pgidOnce.Do(func() {
		s.wrapper = w
		close(s.pgidDecided)
	})
}

// info returns what the wrapper's marker said, once waitPGID returned a
// process group.
func (s *session) info() wrapperInfo {
	select {
	case <-s.pgidDecided:
		return s.wrapper
	default:
		return wrapperInfo{}
	}
}

// standDown tells the dead-man switch to stand down, once stdin is sent:
// the supervisor, stopping, finishes the job.
func (s *session) standDown() { s.disarmOnce.Do(func() { close(s.disarm) }) }

// waitPGID returns the remote process group, waiting up to d for the
// wrapper's line; zero means unknown.
func (s *session) waitPGID(d time.Duration) int64 {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.pgidDecided:
	case <-t.C:
	}
	return s.info().pid
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
