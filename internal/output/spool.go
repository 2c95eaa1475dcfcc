package output

import (
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/redact"
)

const (
	spoolMetaFile           = "meta.json"
	spoolStreamFileSuffix   = ".out"
	handlePrefix            = "out_"
	handleRandomBytes       = 16
	maxReportedHandleLength = 80
)

// SpoolOptions says how much output is kept on disk and for how long.
type SpoolOptions struct {
	// TTL is how long a finished action stays readable; zero keeps it
	// until MaxBytes evicts it.
	TTL time.Duration
	// MaxBytes caps the disk used by all actions together; the oldest
	// finished actions are evicted first. Running actions are never
	// evicted, so they may push use past the cap until they finish. Zero
	// means no cap.
	MaxBytes int64
	// RetainHeadBytes and RetainTailBytes are how many of the first and
	// last bytes of each stream are kept; zero keeps none.
	RetainHeadBytes int64
	RetainTailBytes int64
}

// Errors a *HandleError wraps, for callers that branch.
var (
	ErrMalformedHandle = errors.New("malformed output handle")
	ErrUnknownHandle   = errors.New("unknown output handle: it never existed here, or it expired and was evicted")
	ErrActionRunning   = errors.New("the action is still running")
	ErrUnknownStream   = errors.New("unknown stream")
)

// HandleError is returned by Read and Search for a handle or stream that
// cannot be read. Err is one of the Err*Handle, ErrActionRunning or
// ErrUnknownStream values, possibly wrapped.
type HandleError struct {
	Handle string
	Err    error
}

func (e *HandleError) Error() string {
	h := e.Handle
	if len(h) > maxReportedHandleLength {
		h = h[:maxReportedHandleLength] + "..."
	}
	return fmt.Sprintf("output handle %q: %v", h, e.Err)
}

func (e *HandleError) Unwrap() error { return e.Err }

var handlePattern = regexp.MustCompile(`^` + handlePrefix + `[a-z2-7]{26}$`)

var handleEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// Spool keeps the retained output of actions on disk, under a directory
// only the owner can read, and finds it again by handle. It is safe for
// concurrent use.
type Spool struct {
	dir  string
	opts SpoolOptions
	now  func() time.Time

	mu      sync.Mutex
	actions map[string]*Action
}

// OpenSpool opens (creating it, mode 0700) the spool directory dir, which
// the spool uses alone. Finished actions left there by an earlier run stay
// readable until their TTL.
func OpenSpool(dir string, opts SpoolOptions) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	// MkdirAll keeps the mode of a directory that exists.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict spool directory: %w", err)
	}
	s := &Spool{dir: dir, opts: opts, now: time.Now, actions: make(map[string]*Action)}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read spool directory: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || !handlePattern.MatchString(e.Name()) {
			continue
		}
		a, err := s.load(e.Name())
		if err != nil {
			// Unfinished (the process died) or damaged: unreadable either
			// way, so reclaim the space.
			os.RemoveAll(filepath.Join(dir, e.Name()))
			continue
		}
		s.actions[a.handle] = a
	}
	s.mu.Lock()
	s.evictLocked()
	s.mu.Unlock()
	return s, nil
}

// Action is the output of one action: its handle and its captured
// streams. Make the captures before the producers start, and call Finish
// after they have stopped writing.
type Action struct {
	spool  *Spool
	handle string
	dir    string
	meta   actionMeta
	dirErr error // the action directory could not be made: nothing is spooled

	finish sync.Once

	// Guarded by spool.mu; read-only once the action is finished.
	captures []*Capture
	streams  []*spoolStream
	running  bool
}

type actionMeta struct {
	Handle   string       `json:"handle"`
	Tool     string       `json:"tool"`
	Target   string       `json:"target"`
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Streams  []streamMeta `json:"streams"`
}

// Begin starts an action and gives it a new unguessable handle. It does
// not fail: when the spool cannot store the action, its captures still
// count, hash and preview, and report why nothing was retained.
func (s *Spool) Begin(tool, target string) *Action {
	h := NewHandle()
	a := &Action{
		spool:   s,
		handle:  h,
		dir:     filepath.Join(s.dir, h),
		meta:    actionMeta{Handle: h, Tool: tool, Target: target, Started: s.now()},
		running: true,
	}
	if err := os.Mkdir(a.dir, 0o700); err != nil {
		a.dirErr = err
	}
	s.mu.Lock()
	s.actions[h] = a
	s.evictLocked()
	s.mu.Unlock()
	return a
}

// Handle returns the action's handle, for read_output and search_output.
func (a *Action) Handle() string { return a.handle }

var streamNamePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Capture returns the writer for the named stream ("stdout", "stderr",
// "body"), which redacts with red (nil: no secrets) and keeps previews
// within lim. Asking again for the same name returns the same Capture.
func (a *Action) Capture(stream string, red *redact.Redactor, lim Limits) *Capture {
	for i, st := range a.streams {
		if st.meta.Name == stream {
			return a.captures[i]
		}
	}
	st := &spoolStream{meta: streamMeta{Name: stream, HeadCap: a.spool.opts.RetainHeadBytes, TailCap: a.spool.opts.RetainTailBytes}}
	switch {
	case !streamNamePattern.MatchString(stream):
		st.fail(fmt.Errorf("stream name %q cannot be a file name", stream))
	case a.dirErr != nil:
		st.fail(a.dirErr)
	default:
		st.path = filepath.Join(a.dir, stream+spoolStreamFileSuffix)
	}
	c := newCapture(red, lim, st)
	a.spool.mu.Lock() // eviction reads the streams of running actions
	a.captures = append(a.captures, c)
	a.streams = append(a.streams, st)
	a.spool.mu.Unlock()
	return c
}

// Finish ends the action: it flushes the redactors, closes the spool files
// and makes the output readable. Later calls do nothing.
func (a *Action) Finish() {
	a.finish.Do(func() {
		for i, c := range a.captures {
			c.flush()
			a.streams[i].close()
			a.streams[i].meta.Newlines = c.newlines
		}
		a.meta.Finished = a.spool.now()
		for _, st := range a.streams {
			a.meta.Streams = append(a.meta.Streams, st.meta)
		}
		if a.dirErr == nil {
			if err := writeMeta(a.dir, &a.meta); err != nil {
				// Without its meta file the action is lost to a later
				// process, not to this one.
				a.dirErr = err
			}
		}
		s := a.spool
		s.mu.Lock()
		a.running = false
		s.evictLocked()
		s.mu.Unlock()
	})
}

func writeMeta(dir string, m *actionMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// Written in place, not renamed into place: a torn file does not parse,
	// and OpenSpool reclaims an action whose meta does not load.
	if err := os.WriteFile(filepath.Join(dir, spoolMetaFile), b, 0o600); err != nil {
		return fmt.Errorf("write spool meta: %w", err)
	}
	return nil
}

func (s *Spool) load(handle string) (*Action, error) {
	dir := filepath.Join(s.dir, handle)
	b, err := os.ReadFile(filepath.Join(dir, spoolMetaFile))
	if err != nil {
		return nil, err
	}
	a := &Action{spool: s, handle: handle, dir: dir}
	if err := json.Unmarshal(b, &a.meta); err != nil {
		return nil, err
	}
	if a.meta.Handle != handle {
		return nil, fmt.Errorf("spool meta names handle %q", a.meta.Handle)
	}
	a.finish.Do(func() {})
	for _, m := range a.meta.Streams {
		st := &spoolStream{meta: m}
		rs, _ := st.retained()
		for _, r := range rs {
			st.disk.Add(r.End - r.Start)
		}
		a.streams = append(a.streams, st)
	}
	return a, nil
}

// streamReader reads one finished stream. Its file is opened under the
// spool lock, so an eviction that removes the action meanwhile does not
// take the data from under the reader.
type streamReader struct {
	handle string
	st     *spoolStream
	f      *os.File // nil when nothing was retained
}

// open finds a finished action's stream for reading; the caller closes it.
func (s *Spool) open(handle, stream string) (*streamReader, error) {
	if !handlePattern.MatchString(handle) {
		return nil, &HandleError{Handle: handle, Err: ErrMalformedHandle}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictLocked()
	a := s.actions[handle]
	switch {
	case a == nil:
		return nil, &HandleError{Handle: handle, Err: ErrUnknownHandle}
	case a.running:
		return nil, &HandleError{Handle: handle, Err: ErrActionRunning}
	}
	var names []string
	for _, st := range a.streams {
		if st.meta.Name != stream {
			names = append(names, st.meta.Name)
			continue
		}
		r := &streamReader{handle: handle, st: st}
		if rs, _ := st.retained(); len(rs) > 0 {
			f, err := os.Open(filepath.Join(a.dir, stream+spoolStreamFileSuffix))
			if err != nil {
				return nil, fmt.Errorf("read spooled %s: %w", stream, err)
			}
			r.f = f
		}
		return r, nil
	}
	return nil, &HandleError{Handle: handle, Err: fmt.Errorf("%w %q: this action has %q", ErrUnknownStream, Clip(stream, 40), names)}
}

func (r *streamReader) Close() {
	if r.f != nil {
		r.f.Close()
	}
}

// readAt reads retained stream bytes [off, off+len(b)).
func (r *streamReader) readAt(b []byte, off int64) error {
	m := &r.st.meta
	for len(b) > 0 {
		pos := r.st.fileOffset(off)
		n := len(b)
		if off >= m.HeadCap {
			// Stop at the end of the ring; the rest wraps to its start.
			n = int(min(int64(n), m.HeadCap+m.TailCap-pos))
		} else {
			n = int(min(int64(n), m.HeadCap-off))
		}
		if _, err := r.f.ReadAt(b[:n], pos); err != nil {
			return fmt.Errorf("read spooled %s: %w", m.Name, err)
		}
		b = b[n:]
		off += int64(n)
	}
	return nil
}

// evictLocked removes finished actions past their TTL, then the oldest
// finished ones while the spool is over its disk cap.
func (s *Spool) evictLocked() {
	now := s.now()
	var finished []*Action
	var total int64
	for _, a := range s.actions {
		if !a.running && s.opts.TTL > 0 && now.Sub(a.meta.Finished) > s.opts.TTL {
			s.removeLocked(a)
			continue
		}
		for _, st := range a.streams {
			total += st.diskBytes()
		}
		if !a.running {
			finished = append(finished, a)
		}
	}
	if s.opts.MaxBytes <= 0 || total <= s.opts.MaxBytes {
		return
	}
	slices.SortFunc(finished, func(x, y *Action) int { return x.meta.Finished.Compare(y.meta.Finished) })
	for _, a := range finished {
		if total <= s.opts.MaxBytes {
			break
		}
		for _, st := range a.streams {
			total -= st.diskBytes()
		}
		s.removeLocked(a)
	}
}

func (s *Spool) removeLocked(a *Action) {
	delete(s.actions, a.handle)
	os.RemoveAll(a.dir)
}

// spoolStream writes one redacted stream to its file: the first headCap
// bytes at their own offsets, then the last tailCap bytes in a ring right
// after them. Only the Capture's goroutine touches it until Finish; after
// that it is read-only.
type spoolStream struct {
	// path is where the stream's file goes. It is created at the first
	// byte: most streams of most actions are empty, and each file costs a
	// create and a close (about 0.35 ms each on ext4 here).
	path string
	f    *os.File
	meta streamMeta
	// disk is the bytes on disk, read by eviction from other goroutines.
	disk atomic.Int64
}

type streamMeta struct {
	Name string `json:"name"`
	// HeadCap and TailCap are the retain sizes the file was laid out with.
	HeadCap  int64 `json:"head_cap"`
	TailCap  int64 `json:"tail_cap"`
	Total    int64 `json:"total"`
	Newlines int64 `json:"newlines"`
	// HeadKept is how many of the first bytes are on disk.
	HeadKept int64 `json:"head_kept"`
	// TailLost is set when a ring write failed: the ring holds nothing
	// reliable.
	TailLost bool   `json:"tail_lost,omitempty"`
	Error    string `json:"error,omitempty"`
}

func (st *spoolStream) fail(err error) {
	if st.meta.Error == "" {
		st.meta.Error = err.Error()
	}
	st.meta.TailLost = true
	st.path = ""
	if st.f != nil {
		st.f.Close()
		st.f = nil
	}
}

func (st *spoolStream) write(p []byte) {
	m := &st.meta
	off := m.Total
	m.Total += int64(len(p))
	if st.f == nil && st.path != "" {
		f, err := os.OpenFile(st.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			st.fail(err)
			return
		}
		st.f = f
	}
	if st.f == nil {
		m.TailLost = true
		return
	}
	if off < m.HeadCap {
		n := min(int64(len(p)), m.HeadCap-off)
		if _, err := st.f.WriteAt(p[:n], off); err != nil {
			st.fail(fmt.Errorf("spool %s: %w", m.Name, err))
			return
		}
		m.HeadKept += n
		p = p[n:]
		off += n
	}
	if len(p) > 0 && m.TailCap > 0 {
		// Bytes that the end of p overwrites in the ring need not be
		// written.
		if skip := int64(len(p)) - m.TailCap; skip > 0 {
			p = p[skip:]
			off += skip
		}
		pos := (off - m.HeadCap) % m.TailCap
		first := min(int64(len(p)), m.TailCap-pos)
		_, err := st.f.WriteAt(p[:first], m.HeadCap+pos)
		if err == nil && first < int64(len(p)) {
			_, err = st.f.WriteAt(p[first:], m.HeadCap)
		}
		if err != nil {
			st.fail(fmt.Errorf("spool %s: %w", m.Name, err))
			return
		}
	}
	st.disk.Store(m.HeadKept + max(0, min(m.Total-m.HeadCap, m.TailCap)))
}

func (st *spoolStream) close() {
	if st.f != nil {
		if err := st.f.Close(); err != nil {
			st.fail(fmt.Errorf("spool %s: %w", st.meta.Name, err))
		}
		st.f = nil
	}
}

func (st *spoolStream) diskBytes() int64 { return st.disk.Load() }

// retained returns the ranges on disk and the spool error, if any.
func (st *spoolStream) retained() ([]ByteRange, string) {
	m := st.meta
	var rs []ByteRange
	if m.HeadKept > 0 {
		rs = append(rs, ByteRange{0, m.HeadKept})
	}
	if !m.TailLost && m.Total > m.HeadCap && m.TailCap > 0 {
		start := max(m.HeadCap, m.Total-m.TailCap)
		if len(rs) > 0 && start == m.HeadKept {
			rs[0].End = m.Total
		} else {
			rs = append(rs, ByteRange{start, m.Total})
		}
	}
	return rs, m.Error
}

// fileOffset maps a retained stream offset to its place in the file.
func (st *spoolStream) fileOffset(off int64) int64 {
	m := &st.meta
	if off < m.HeadCap {
		return off
	}
	return m.HeadCap + (off-m.HeadCap)%m.TailCap
}
