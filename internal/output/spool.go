package output

import (
	"context"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
	"github.com/actiongw/actiongw/internal/redact"
)

const (
	spoolMetaFile           = "meta.json"
	spoolStreamFileSuffix   = ".out"
	handlePrefix            = "out_"
	handleRandomBytes       = 16
	maxReportedHandleLength = 80
	// defaultBlockSize is the allocation unit assumed where the filesystem
	// does not tell: ext4's, XFS's and tmpfs's.
	defaultBlockSize = 4096
)

// SpoolOptions says how much output is kept on disk and for how long, and
// how many readers may use it at once.
type SpoolOptions struct {
	// TTL is how long a finished action stays readable; zero keeps it
	// until MaxBytes evicts it.
	TTL time.Duration
	// MaxBytes caps the disk this process's spool uses: every action's
	// directory, meta.json and stream files, each rounded up to whole
	// filesystem blocks. The oldest finished actions are evicted first.
	// Running actions are never evicted, nor the KeepNewest newest
	// finished ones, so they may push use past the cap. Zero means no
	// cap.
	MaxBytes int64
	// KeepNewest is how many of the newest finished actions MaxBytes does
	// not evict, so that the handle a result just named can be read back
	// even when one action takes more than the cap. TTL and Reclaim still
	// evict them. Zero keeps none past the cap.
	KeepNewest int
	// RetainHeadBytes and RetainTailBytes are how many of the first and
	// last bytes of each stream are kept; zero keeps none.
	RetainHeadBytes int64
	RetainTailBytes int64
	// MaxConcurrentReads bounds the Read and Search calls that run at
	// once; more wait for a turn. Zero allows one.
	MaxConcurrentReads int
}

// Errors a *HandleError wraps, for callers that branch.
var (
	ErrMalformedHandle = errors.New("malformed output handle")
	ErrUnknownHandle   = errors.New("unknown output handle: it never existed here, or it expired and was evicted")
	ErrUnknownStream   = errors.New("unknown stream")
)

// HandleError is returned by Read and Search for a handle or stream that
// cannot be read. Err is one of the Err*Handle or
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
//
// Several processes may share one spool directory. Each keeps its actions
// in a directory of its own (see owners.go), reads and evicts only those,
// and takes over the actions of processes that have ended. A process opens
// a spool directory once.
type Spool struct {
	dir   string
	own   string // this process's directory in dir
	self  owner.ID
	alive func(owner.ID) bool
	opts  SpoolOptions
	block int64 // the filesystem's allocation unit
	now   func() time.Time
	turns chan struct{} // a token for each Read or Search running
	// searchLimit is SearchTimeLimit; tests shorten it.
	searchLimit time.Duration

	// disk is what the actions in actions take on disk (see
	// Action.diskBytes): their streams add what they write to it as they
	// write, so eviction need not add up every action each time.
	disk atomic.Int64

	mu sync.Mutex
	// actions holds the running actions, the newest finished ones
	// (recent), and the finished ones whose meta.json could not be
	// written, which only memory can read. Any other finished action is
	// read from its meta.json on disk, and is in memory only as its entry
	// in finished: tens of bytes, not the kilobytes of an Action.
	actions map[string]*Action
	// finished holds every finished action, oldest first (by its finish
	// time), as what eviction needs of it: eviction and Reclaim take from
	// its front.
	finished []entry
	// recent holds this process's newest finished actions, oldest first;
	// those in actions are read from memory.
	recent    []*Action
	nextAdopt time.Time // when eviction next looks for ended owners
	// claims are the directories taken over from ended processes whose
	// actions the adopter has not moved in yet, oldest claim first;
	// settled is closed when it has moved them all.
	claims  []string
	settled chan struct{}

	wake      chan struct{} // a claim for the adopter
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	adopted   chan struct{} // closed when the adopter returns
}

// OpenSpool opens (creating it, mode 0700) the spool directory dir. The
// finished actions of processes that used dir and have ended are taken
// over and stay readable until their TTL; their unfinished actions are
// recovered as far as the disk allows, marked interrupted. They are moved
// in on a goroutine of the Spool, which Close stops: a read of one not
// moved yet moves it at once. Close the Spool when done.
func OpenSpool(dir string, opts SpoolOptions) (*Spool, error) {
	return openSpool(dir, opts, owner.Self(), owner.ID.Alive)
}

// openSpool opens dir as the process self; alive says whether another
// process still runs.
func openSpool(dir string, opts SpoolOptions, self owner.ID, alive func(owner.ID) bool) (*Spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create spool directory: %w", err)
	}
	// MkdirAll keeps the mode of a directory that exists.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict spool directory: %w", err)
	}
	s := &Spool{
		dir:         dir,
		own:         filepath.Join(dir, ownerDirPrefix+string(self)),
		self:        self,
		alive:       alive,
		opts:        opts,
		block:       blockSize(dir),
		now:         time.Now,
		turns:       make(chan struct{}, max(1, opts.MaxConcurrentReads)),
		searchLimit: SearchTimeLimit,
		actions:     make(map[string]*Action),
		settled:     make(chan struct{}),
		wake:        make(chan struct{}, 1),
		closing:     make(chan struct{}),
		adopted:     make(chan struct{}),
	}
	close(s.settled)
	claim, err := s.makeOwnDir()
	if err != nil {
		// The claimed directory stays for a later process to take over.
		return nil, err
	}
	s.mu.Lock()
	if claim != "" {
		s.claimLocked(claim)
	}
	s.adoptLocked(true)
	s.nextAdopt = s.now().Add(adoptEvery)
	s.evictLocked()
	s.mu.Unlock()
	go s.adopt()
	return s, nil
}

// acquire waits for a turn to read, or for ctx to end; the caller calls
// release when it is done.
func (s *Spool) acquire(ctx context.Context) (release func(), err error) {
	release = func() { <-s.turns }
	select {
	case s.turns <- struct{}{}:
		return release, nil
	default:
	}
	select {
	case s.turns <- struct{}{}:
		return release, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a turn to read output: %w", context.Cause(ctx))
	}
}

// Action is the output of one action: its handle and its captured
// streams. Make the captures before the producers start, and call Finish
// after they have stopped writing.
type Action struct {
	spool  *Spool
	handle string
	dir    string // moves once, when a loaded action is taken over
	meta   actionMeta
	dirErr error // the action directory could not be made: nothing is spooled
	hasDir bool  // the directory was made; set before the action is shared

	finish sync.Once

	// Guarded by spool.mu; read-only once the action is finished.
	captures []*Capture
	streams  []*spoolStream
	running  bool
	// metaDisk is what meta.json takes on disk; a block is counted for it
	// while the action runs.
	metaDisk int64
}

type actionMeta struct {
	Handle   string    `json:"handle"`
	Tool     string    `json:"tool"`
	Target   string    `json:"target"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Interrupted is set when the process that ran the action ended before
	// it finished, and another recovered what was on disk.
	Interrupted bool         `json:"interrupted,omitempty"`
	Streams     []streamMeta `json:"streams"`
}

// Begin starts an action and gives it a new unguessable handle. It does
// not fail: when the spool cannot store the action, its captures still
// count, hash and preview, and report why nothing was retained.
func (s *Spool) Begin(tool, target string) *Action {
	h := NewHandle()
	a := &Action{
		spool:   s,
		handle:  h,
		dir:     filepath.Join(s.own, h),
		meta:    actionMeta{Handle: h, Tool: tool, Target: target, Started: s.now()},
		running: true,
	}
	err := os.Mkdir(a.dir, 0o700)
	if err != nil && s.reclaimFor(err, 0) {
		err = os.Mkdir(a.dir, 0o700)
	}
	if err != nil {
		a.dirErr = err
	} else {
		a.hasDir, a.metaDisk = true, s.block
	}
	s.mu.Lock()
	s.actions[h] = a
	s.disk.Add(a.diskBytes())
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
		if st.name == stream {
			return a.captures[i]
		}
	}
	st := &spoolStream{spool: a.spool, name: stream, meta: streamMeta{Name: stream, HeadCap: a.spool.opts.RetainHeadBytes, TailCap: a.spool.opts.RetainTailBytes}}
	switch {
	case !streamNamePattern.MatchString(stream):
		st.fail(fmt.Errorf("stream name %q cannot be a file name", stream))
	case a.dirErr != nil:
		st.fail(a.dirErr)
	case st.meta.HeadCap > 0 || st.meta.TailCap > 0:
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
		}
		s := a.spool
		a.meta.Finished = s.now()
		for _, st := range a.streams {
			a.meta.Streams = append(a.meta.Streams, st.snapshot())
		}
		metaDisk := a.metaDisk
		if a.dirErr == nil {
			n, err := writeMeta(a.dir, &a.meta)
			if err != nil && s.reclaimFor(err, 0) {
				n, err = writeMeta(a.dir, &a.meta)
			}
			if err != nil {
				// A later process recovers the action as interrupted;
				// this one reads it from memory.
				a.dirErr = err
			} else {
				metaDisk = s.blocks(int64(n))
			}
		}
		s.mu.Lock()
		a.running = false
		if a.hasDir {
			s.disk.Add(metaDisk - a.metaDisk)
		}
		a.metaDisk = metaDisk
		// The captures are their owner's; the spool reads the streams.
		a.captures = nil
		s.addFinishedLocked(a)
		s.keepRecentLocked(a)
		s.evictLocked()
		s.mu.Unlock()
	})
}

// writeMeta writes an action's meta.json and returns its size.
func writeMeta(dir string, m *actionMeta) (int, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	// Written in place, not renamed into place: a torn file does not parse,
	// and the action is then recovered as interrupted.
	if err := os.WriteFile(filepath.Join(dir, spoolMetaFile), b, 0o600); err != nil {
		return 0, fmt.Errorf("write spool meta: %w", err)
	}
	return len(b), nil
}

// load reads the finished action handle in dir.
func (s *Spool) load(dir, handle string) (*Action, error) {
	b, err := os.ReadFile(filepath.Join(dir, spoolMetaFile))
	if err != nil {
		return nil, err
	}
	a := &Action{spool: s, handle: handle, dir: dir, hasDir: true, metaDisk: s.blocks(int64(len(b)))}
	if err := json.Unmarshal(b, &a.meta); err != nil {
		return nil, err
	}
	if a.meta.Handle != handle {
		return nil, fmt.Errorf("spool meta names handle %q", a.meta.Handle)
	}
	a.finish.Do(func() {})
	for _, m := range a.meta.Streams {
		if !streamNamePattern.MatchString(m.Name) {
			return nil, fmt.Errorf("spool meta names stream %q", m.Name)
		}
		st := &spoolStream{spool: s, name: m.Name, meta: m}
		if fi, err := os.Stat(filepath.Join(dir, m.Name+spoolStreamFileSuffix)); err == nil {
			st.disk.Store(s.blocks(fi.Size()))
		}
		a.streams = append(a.streams, st)
	}
	return a, nil
}

// diskBytes is what the action takes on disk, as MaxBytes counts it.
func (a *Action) diskBytes() int64 {
	if !a.hasDir {
		return 0
	}
	n := a.spool.block + a.metaDisk
	for _, st := range a.streams {
		n += st.diskBytes()
	}
	return n
}

// blocks is what a file of n bytes takes on disk: whole blocks, at least
// one.
func (s *Spool) blocks(n int64) int64 {
	return max(1, (n+s.block-1)/s.block) * s.block
}

// reclaimFor reports whether err says the disk is full and Reclaim freed
// room for a write of n bytes: the caller tries the write once more. It
// evicts as little as it can, at least one action; a later write that
// finds the disk full again evicts the next.
func (s *Spool) reclaimFor(err error, n int64) bool {
	return isNoSpace(err) && s.Reclaim(max(n, s.block)) > 0
}

// streamReader reads one finished stream. Its file is opened under the
// spool lock, so an eviction that removes the action meanwhile does not
// take the data from under the reader.
type streamReader struct {
	handle string
	st     *spoolStream
	// meta is the stream as it was when the reader looked; running is set
	// when the action had not finished then.
	meta        streamMeta
	running     bool
	interrupted bool
	f           *os.File // nil when nothing was retained
	release     func()   // gives the turn back
}

// open waits for a turn to read (see SpoolOptions.MaxConcurrentReads),
// then finds a finished action's stream; closing the reader gives the turn
// back. A malformed handle is refused without waiting.
func (s *Spool) open(ctx context.Context, handle, stream string) (*streamReader, error) {
	if !handlePattern.MatchString(handle) {
		return nil, &HandleError{Handle: handle, Err: ErrMalformedHandle}
	}
	release, err := s.acquire(ctx)
	if err != nil {
		return nil, err
	}
	r, err := s.find(handle, stream)
	if err != nil {
		release()
		return nil, err
	}
	r.release = release
	return r, nil
}

func (s *Spool) find(handle, stream string) (*streamReader, error) {
	s.mu.Lock()
	locked := true
	defer func() {
		if locked {
			s.mu.Unlock()
		}
	}()
	s.evictLocked()
	a := s.actions[handle]
	if a == nil {
		a = s.loadOwnLocked(handle)
	}
	if a == nil {
		a = s.adoptHandleLocked(handle)
	}
	if a == nil {
		return nil, &HandleError{Handle: handle, Err: ErrUnknownHandle}
	}
	var names []string
	for _, st := range a.streams {
		if st.name != stream {
			names = append(names, st.name)
			continue
		}
		r := &streamReader{handle: handle, st: st, running: a.running, interrupted: a.meta.Interrupted}
		if r.running {
			// Its writer may hold the stream's lock and wait for the
			// spool's (to reclaim space): take the stream's without the
			// spool's. A running action is never evicted.
			s.mu.Unlock()
			locked = false
		}
		// A running action's stream grows while it is read: the reader
		// reads what had arrived when it looked (its meta), and readAt
		// checks that the ring did not overwrite it since.
		r.meta = st.snapshot()
		if rs, _ := r.meta.retained(); len(rs) > 0 {
			f, err := os.Open(filepath.Join(a.dir, stream+spoolStreamFileSuffix))
			if errors.Is(err, fs.ErrNotExist) && r.running {
				// It finished and was evicted since the spool's lock was let go.
				return nil, &HandleError{Handle: handle, Err: ErrUnknownHandle}
			}
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
	r.release()
}

// ErrOverwritten is returned when bytes of a running action's stream were
// replaced in the ring of its last bytes while they were being read.
var ErrOverwritten = errors.New("newer output replaced these bytes while they were read (only the last retain_tail_bytes of a stream are kept)")

// readAt reads retained stream bytes [off, off+len(b)).
func (r *streamReader) readAt(b []byte, off int64) error {
	if r.running {
		// The writer waits while the bytes are read, and they must still
		// be in the ring.
		r.st.mu.Lock()
		defer r.st.mu.Unlock()
		if m := &r.st.meta; off >= m.HeadCap && off < m.Total-m.TailCap {
			return fmt.Errorf("offset %d of %s: %w", off, m.Name, ErrOverwritten)
		}
	}
	m := &r.meta
	for len(b) > 0 {
		pos := m.fileOffset(off)
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

// spoolStream writes one redacted stream to its file: the first headCap
// bytes at their own offsets, then the last tailCap bytes in a ring right
// after them. Only the Capture's goroutine touches it until Finish; after
// that it is read-only.
type spoolStream struct {
	spool *Spool
	name  string // meta.Name, which never changes
	// mu guards meta and the file's bytes while the action runs: the
	// Capture's goroutine writes them, and readers of the running action
	// read them.
	mu sync.Mutex
	// path is where the stream's file goes. It is created at the first
	// byte: most streams of most actions are empty, and each file costs a
	// create and a close (about 0.35 ms each on ext4 here).
	path string
	f    *os.File
	meta streamMeta
	// disk is what the file takes on disk, read by eviction from other
	// goroutines.
	disk atomic.Int64
	// gone says why the action was evicted; nil while it is kept. Atomic,
	// not under mu: eviction holds the spool's lock, which a writer may
	// wait for while it holds mu.
	gone atomic.Pointer[string]
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
	// Complete is set when the stream ended normally, not cut short by a
	// timeout, a cancel or a limit: it holds all its producer gave. A
	// spool written before the mark existed has it unset, which errs on
	// the side of "maybe cut".
	Complete bool `json:"complete,omitempty"`
}

// evicted records that the stream's action was removed from the spool, and
// why: a result built from it afterwards says so instead of naming output
// that is gone.
func (st *spoolStream) evicted(why string) { st.gone.Store(&why) }

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

func (st *spoolStream) write(p []byte, newlines int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	m := &st.meta
	off := m.Total
	m.Total += int64(len(p))
	m.Newlines += newlines
	if st.f == nil && st.path != "" {
		f, err := os.OpenFile(st.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil && st.spool.reclaimFor(err, int64(len(p))) {
			f, err = os.OpenFile(st.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		}
		if err != nil {
			st.fail(err)
			return
		}
		st.f = f
		st.setDisk(st.spool.block)
	}
	if st.f == nil {
		m.TailLost = true
		return
	}
	if off < m.HeadCap {
		n := min(int64(len(p)), m.HeadCap-off)
		if err := st.writeAt(p[:n], off); err != nil {
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
		err := st.writeAt(p[:first], m.HeadCap+pos)
		if err == nil && first < int64(len(p)) {
			err = st.writeAt(p[first:], m.HeadCap)
		}
		if err != nil {
			st.fail(fmt.Errorf("spool %s: %w", m.Name, err))
			return
		}
	}
	st.setDisk(st.spool.blocks(m.HeadKept + max(0, min(m.Total-m.HeadCap, m.TailCap))))
}

// writeAt writes p at off in the file; when the disk is full it has the
// spool reclaim space and tries once more.
func (st *spoolStream) writeAt(p []byte, off int64) error {
	_, err := st.f.WriteAt(p, off)
	if err != nil && st.spool.reclaimFor(err, int64(len(p))) {
		_, err = st.f.WriteAt(p, off)
	}
	return err
}

func (st *spoolStream) close() {
	st.mu.Lock() // a reader of the running action may look at meta
	defer st.mu.Unlock()
	if st.f != nil {
		if err := st.f.Close(); err != nil {
			st.fail(fmt.Errorf("spool %s: %w", st.meta.Name, err))
		}
		st.f = nil
	}
}

func (st *spoolStream) complete() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.meta.Complete = true
}

func (st *spoolStream) diskBytes() int64 { return st.disk.Load() }

// setDisk records that the stream's file takes n bytes on disk now, in
// the spool's total too: it is called only while the action runs, when
// the action is in the spool's actions.
func (st *spoolStream) setDisk(n int64) { st.spool.disk.Add(n - st.disk.Swap(n)) }

// snapshot returns the stream's meta as it is now.
func (st *spoolStream) snapshot() streamMeta {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.meta
}

// retained returns the ranges on disk and the spool error, if any: none
// and why, once the action was evicted.
func (st *spoolStream) retained() ([]ByteRange, string) {
	if why := st.gone.Load(); why != nil {
		return []ByteRange{}, *why
	}
	m := st.snapshot()
	return m.retained()
}

// retained returns the ranges of the stream on disk and the spool error,
// if any.
func (m *streamMeta) retained() ([]ByteRange, string) {
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
func (m *streamMeta) fileOffset(off int64) int64 {
	if off < m.HeadCap {
		return off
	}
	return m.HeadCap + (off-m.HeadCap)%m.TailCap
}
