package audit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
)

// Options configure OpenWith. The zero value opens an unkeyed log that
// never rotates.
type Options struct {
	// Redact is applied to every string field of a record before it is
	// written; nil writes them as given.
	Redact func(string) string
	// Key is the HMAC-SHA256 key of the chain (NewKey makes one). With a
	// key every record carries a MAC and the head file is authenticated,
	// so nobody without it can rewrite the log, or cut records off its
	// end, unseen. nil writes an unkeyed chain, which anyone who can write
	// the state directory can rewrite with recomputed hashes; a log that
	// is keyed already is then refused with ErrNoKey.
	Key Key
	// Checkpoint is the last checkpoint SaveCheckpoint saved, as read back
	// from where it was kept; nil when there is none (the first start, no
	// keyring). OpenWith refuses a log that does not contain it: one that
	// was emptied, cut short or replaced.
	Checkpoint *Checkpoint
	// SaveCheckpoint keeps a checkpoint outside the state directory (the
	// keyring). With a Key, it is called at open and at close, on the
	// caller's goroutine, and after a rotation and every checkpointEvery
	// records or checkpointInterval, on a goroutine of the Log, never on
	// an Append's path; those calls come one at a time. It handles its own
	// failures (a checkpoint not saved only weakens the check). nil saves
	// none.
	SaveCheckpoint func(Checkpoint)
	// RotateBytes is the size from which the active file is renamed and
	// a new one started; the chain goes on in it. 0 never rotates.
	RotateBytes int64
	// Logger receives what goes wrong without failing an Append (a
	// rotation that could not be done); nil discards it.
	Logger *slog.Logger
	// Written, if set, is given each line this process writes (without
	// its newline), in the order of the chain, once the line is on disk:
	// the audit export sends what the log holds, as it holds it. It is
	// called under the log's write lock, so it must return at once and
	// must not keep line, which is reused after it returns. nil gives
	// the lines to nobody.
	Written func(line []byte)
}

const (
	// maxBatch bounds the records one commit writes, and so how far the
	// head file can lag behind the log after a crash.
	maxBatch = 256
)

// How often a checkpoint is offered to SaveCheckpoint while records are
// appended; variables for the tests.
var (
	checkpointEvery    = 1000
	checkpointInterval = 30 * time.Second
)

// Log is an append-only JSON Lines file in which each record carries the
// hash of the line before it, and, with a key, its own MAC. A head file
// beside it records the last record, so a record cut off the end shows too.
//
// Any number of processes may append to one log: every write happens under
// an exclusive lock on a lock file, after reading what the others appended
// since, so seq and prev always continue the file, not this process's
// memory. Appends of one process that arrive together share one write and
// one fsync (group commit); each Append returns once its record is on
// disk, and the head file written. The head file's fsync runs beside the
// next steps of the caller, on a goroutine of the Log (headSyncer): it
// cost as much as the record's, on the path of every action's intent and
// outcome. After a crash the head file may lag behind the log, which
// verify reports and the next start mends; it is never ahead of it.
type Log struct {
	path string
	opts Options
	lock *os.File

	mu     sync.Mutex // guards batch and closed
	batch  *batch     // collecting records for its leader to commit
	closed bool

	commitMu sync.Mutex  // held by the goroutine committing; guards the rest
	f        *os.File    // the active file, as this process last saw it
	fi       os.FileInfo // f's, to tell whether it is still the active file
	size     int64       // bytes of f read or written: its end, under the lock
	lines    int         // lines in f before size
	first    int64       // seq of f's first record; 0 while f is empty
	head     *os.File
	ch       chain
	torn     *Record // a repair record to write for a torn line sync found
	failed   error   // once set, every Append returns it
	// rotateWarned is set once a failed rotation was logged.
	rotateWarned bool
	saver        *saver
	heads        *headSyncer // nil while OpenWith opens: the head is synced at once
	unsaved      int         // records since the last checkpoint offered
	savedAt      time.Time   // when it was

	// resumed is set when OpenWith read only the end of the chain; the
	// rest is verified on a goroutine (backgroundVerify), which
	// stopVerify stops. verified is closed when it is done, and verifyErr
	// then holds the damage it found.
	resumed    bool
	stopVerify context.CancelCauseFunc
	verified   chan struct{}
	verifyErr  error
}

// batch is records that are committed together.
type batch struct {
	recs []*Record
	done chan struct{}
	err  error
}

// OpenWith opens (creating, mode 0600) the audit log at path and its
// rotated, head and lock files. It verifies the whole chain first and
// returns a *DamagedError for a log that fails, naming the file, the line
// and the way out (Seal). For a keyed log without a key it returns an
// error that wraps ErrNoKey. With a key, a log that has records without
// one gets a "key" record after them, from which on all are keyed.
//
// Other processes may append while OpenWith reads: it catches up with
// them under the lock.
func OpenWith(ctx context.Context, path string, opts Options) (*Log, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	a := &Log{path: path, opts: opts, ch: chain{sign: newSigner(opts.Key), pending: map[string]pendingIntent{}}, verified: make(chan struct{})}
	if cp := opts.Checkpoint; cp != nil {
		a.ch.marks = map[int64]*mark{cp.Seq: {}}
	}
	var err error
	if a.lock, err = os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	if err := a.open(ctx); err != nil {
		a.closeFiles()
		return nil, err
	}
	if cp, ok := a.checkpoint(); ok && opts.SaveCheckpoint != nil {
		opts.SaveCheckpoint(cp)
		a.unsaved, a.savedAt = 0, time.Now()
		a.saver = startSaver(opts.SaveCheckpoint)
	}
	a.heads = startHeadSyncer()
	if !a.resumed {
		close(a.verified)
		return a, nil
	}
	a.ch.resolved = map[string]bool{}
	vctx, stop := context.WithCancelCause(context.Background())
	a.stopVerify = stop
	go a.backgroundVerify(vctx)
	return a, nil
}

func (a *Log) open(ctx context.Context) error {
	var err error
	if a.head, err = os.OpenFile(headPath(a.path), os.O_RDWR|os.O_CREATE, 0o600); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if err := a.readChain(ctx); err != nil {
		return err
	}
	if err := lockFile(a.lock, true); err != nil {
		return fmt.Errorf("audit log: lock: %w", err)
	}
	defer unlockFile(a.lock)
	if err := a.sync(); err != nil {
		var de *DamagedError
		if errors.As(err, &de) {
			return de
		}
		return err
	}
	h, err := readHead(a.path)
	if err != nil {
		return err
	}
	if err := checkHead(&a.ch, h, a.path, a.ch.hashOf); err != nil {
		return err
	}
	// A checkpoint older than the records read is checked with the whole
	// chain, in the background.
	if cp := a.opts.Checkpoint; cp != nil && (!a.resumed || cp.Seq >= a.ch.first) {
		if err := checkCheckpoint(&a.ch, cp, a.path); err != nil {
			return err
		}
	}
	var recs []*Record
	switch {
	case a.opts.Key == nil && a.ch.keyedFrom != 0:
		return fmt.Errorf("audit log %s: %w (it is keyed from record %d on; is the keyring reachable?)", a.path, ErrNoKey, a.ch.keyedFrom)
	case a.opts.Key != nil && a.ch.mac == "":
		recs = append(recs, &Record{Kind: KindKey, KeyID: a.ch.sign.id,
			Reason: "from here on every record carries a mac: the HMAC-SHA256 of its line under the audit key"})
	}
	if len(recs) > 0 || a.torn != nil || h.Seq != a.ch.seq || (a.opts.Key != nil && h.MAC == "") {
		return a.write(recs)
	}
	return nil
}

// readChain follows the whole chain, file by file, without the lock:
// other processes may append, or rotate, meanwhile. It leaves a.f open on
// the active file and read up to its last complete line.
func (a *Log) readChain(ctx context.Context) error {
	var err error
	// The active file first: if it is rotated from now on, it will be
	// among the rotated files listed below, and is left out there.
	f, err := openActive(a.path)
	if err != nil {
		return err
	}
	if err := a.activate(f); err != nil {
		return err
	}
	fi := a.fi
	files, err := listFiles(a.path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	// The files before the active one, oldest first.
	var chain []logFile
	for _, lf := range files[:len(files)-1] {
		if st, err := os.Stat(lf.path); err == nil && os.SameFile(st, fi) {
			break
		}
		chain = append(chain, lf)
	}
	if a.resumed, err = a.resumeChain(ctx, append(chain, files[len(files)-1])); a.resumed || err != nil {
		return err
	}
	for _, lf := range files[:len(files)-1] {
		if st, err := os.Stat(lf.path); err == nil && os.SameFile(st, fi) {
			break
		}
		if err := openRotated(ctx, &a.ch, lf); err != nil {
			return err
		}
	}
	end, lines, _, err := follow(ctx, &a.ch, a.f, a.path, 0, fi.Size(), 0, a.ch.seq == 0)
	if err != nil {
		return err
	}
	a.setRead(end, lines)
	return nil
}

// openRotated opens the rotated file lf and follows it.
func openRotated(ctx context.Context, c *chain, lf logFile) error {
	f, err := os.Open(lf.path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return readRotated(ctx, c, lf, f, fi.Size())
}

// readRotated follows f, the rotated file lf, which must be whole.
func readRotated(ctx context.Context, c *chain, lf logFile, f io.ReaderAt, size int64) error {
	from, fromHash := c.seq, c.hash
	_, lines, partial, err := follow(ctx, c, f, lf.path, 0, size, 0, from == 0)
	switch {
	case err != nil:
		return err
	case partial > 0:
		return &DamagedError{File: lf.path, Line: lines + 1, LastSeq: c.seq, LastHash: c.hash,
			Reason: "an incomplete last line in a rotated file, which no writer appends to"}
	case lines == 0:
		return &DamagedError{File: lf.path, Reason: "a rotated file without records", LastSeq: c.seq, LastHash: c.hash}
	case from+1 != lf.first:
		return &DamagedError{File: lf.path, Line: 1, LastSeq: from, LastHash: fromHash,
			Reason: fmt.Sprintf("the file is named for record %d but begins with record %d", lf.first, from+1)}
	}
	return nil
}

// follow reads the lines of f (named name) between off and size into c,
// line numbers going on from line. It returns the offset and line count
// after the last complete line, and the size of an incomplete one after
// it. With start, f begins the chain: it must not begin with a rotated
// file's record.
func follow(ctx context.Context, c *chain, f io.ReaderAt, name string, off, size int64, line int, start bool) (end int64, lines int, partial int64, err error) {
	r := newLineReader(io.NewSectionReader(f, off, size-off))
	for {
		b, err := r.next()
		switch {
		case err == io.EOF:
			return off + r.off, line, 0, nil
		case errors.Is(err, errPartial):
			return off + r.off, line, int64(len(b)), nil
		case err != nil:
			var long *longLineError
			if errors.As(err, &long) {
				return 0, 0, 0, &DamagedError{File: name, Line: line + 1, Reason: long.Error(), LastSeq: c.seq, LastHash: c.hash}
			}
			return 0, 0, 0, fmt.Errorf("audit log: %w", err)
		}
		line++
		if start && c.seq == 0 {
			var first struct{ Seq int64 }
			if json.Unmarshal(b, &first) == nil && first.Seq > 1 {
				return 0, 0, 0, &DamagedError{File: name, Line: line,
					Reason: fmt.Sprintf("the log's oldest file begins at record %d: the files before it are missing", first.Seq)}
			}
		}
		if err := c.add(b, name, line); err != nil {
			return 0, 0, 0, err
		}
		if line%4096 == 0 && ctx.Err() != nil {
			return 0, 0, 0, context.Cause(ctx)
		}
	}
}

func openActive(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return f, nil
}

// activate makes f, read up to nothing yet, the active file, closing the
// one before.
func (a *Log) activate(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return &WriteError{Op: "read the log's end", Err: err}
	}
	if a.f != nil {
		a.f.Close()
	}
	a.f, a.fi = f, fi
	a.setRead(0, 0)
	return nil
}

// setRead records that the active file is read up to end (lines lines).
func (a *Log) setRead(end int64, lines int) {
	a.size, a.lines, a.first = end, lines, 0
	if lines > 0 {
		a.first = a.ch.seq - int64(lines) + 1
	}
}

// Append writes rec as one line, chained to the last line of the log, and
// returns once it is on disk. String fields are redacted, and cut to a
// prefix if long (Cut records the whole field's size and hash); Seq, Prev,
// Owner and, if zero, Time are set, and rec is updated to what was
// written. Only intents and outcomes are appended.
//
// On error nothing of rec stays in the file unless the error is a
// *WriteError that is Stopped; the action rec describes must not go on.
// A full disk matches ErrDiskFull: free space and append again.
func (a *Log) Append(rec *Record) error {
	r, err := prepare(rec, a.opts.Redact)
	if err != nil {
		return err
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return ErrClosed
	}
	b := a.batch
	lead := b == nil || len(b.recs) == maxBatch
	if lead {
		b = &batch{done: make(chan struct{})}
		a.batch = b
	}
	b.recs = append(b.recs, r)
	a.mu.Unlock()

	if lead {
		// While the batch before commits, this one fills; then its
		// leader takes it, closed to newcomers, and commits it.
		a.commitMu.Lock()
		a.mu.Lock()
		if a.batch == b {
			a.batch = nil
		}
		a.mu.Unlock()
		b.err = a.commit(b.recs)
		a.commitMu.Unlock()
		close(b.done)
	} else {
		<-b.done
	}
	if b.err != nil {
		return b.err
	}
	*rec = *r
	return nil
}

// commit writes recs under the lock, after what others appended.
func (a *Log) commit(recs []*Record) error {
	if a.failed != nil {
		return a.failed
	}
	if a.f == nil {
		return ErrClosed
	}
	if a.heads != nil {
		if err := a.heads.failure(); err != nil {
			return a.stop("head", err)
		}
	}
	if err := lockFile(a.lock, true); err != nil {
		return &WriteError{Op: "lock", Err: err}
	}
	defer unlockFile(a.lock)
	if err := a.sync(); err != nil {
		return err
	}
	if err := a.rotate(); err != nil && !a.rotateWarned {
		// Said once: it is tried again at every commit, and on Windows
		// it fails for as long as another process holds the file open.
		a.opts.Logger.Warn("audit log: not rotated; appending to the active file, and trying again at every append", "path", a.path, "error", err)
		a.rotateWarned = true
	}
	return a.write(recs)
}

// stop makes every later Append return err, and returns it.
func (a *Log) stop(op string, err error) error {
	a.failed = &WriteError{Op: op, Stopped: true, Err: err}
	return a.failed
}

// sync brings a.ch to the end of the log, under the lock: it reads what
// other processes appended, follows a rotation, and notes a torn last line
// (a write that never completed; its writer no longer holds the lock).
func (a *Log) sync() error {
	st, err := os.Stat(a.path)
	if err != nil && !os.IsNotExist(err) {
		return &WriteError{Op: "read the log's end", Err: err}
	}
	same := err == nil && os.SameFile(st, a.fi)
	if !same {
		// Rotated, sealed or removed: read what is left of the file
		// this process had.
		if st, err = a.f.Stat(); err != nil {
			return &WriteError{Op: "read the log's end", Err: err}
		}
	}
	if st.Size() < a.size {
		return a.stop("read the log's end", &DamagedError{File: a.path, Line: a.lines, LastSeq: a.ch.seq, LastHash: a.ch.hash,
			Reason: fmt.Sprintf("the file shrank from %d to %d bytes under this process: records were removed", a.size, st.Size())})
	}
	if err := a.catchUp(a.f, a.path, st.Size(), same); err != nil || same {
		return err
	}
	if err := a.followRotation(); err != nil {
		return err
	}
	return a.reopenHead()
}

// catchUp reads f, the active file or the one it was until a rotation,
// from a.size to size.
func (a *Log) catchUp(f *os.File, name string, size int64, active bool) error {
	if size == a.size {
		return nil
	}
	end, lines, partial, err := follow(context.Background(), &a.ch, f, name, a.size, size, a.lines, false)
	if err != nil {
		return a.stop("read the log's end", err)
	}
	a.setRead(end, lines)
	if partial == 0 {
		return nil
	}
	if !active {
		return a.stop("read the log's end", &DamagedError{File: name, Line: lines + 1, LastSeq: a.ch.seq, LastHash: a.ch.hash,
			Reason: "an incomplete last line in a rotated file"})
	}
	torn := make([]byte, partial)
	if _, err := f.ReadAt(torn, end); err != nil {
		return &WriteError{Op: "read the log's end", Err: err}
	}
	sum := sha256.Sum256(torn)
	a.torn = &Record{Kind: KindRepair, Reason: fmt.Sprintf(
		"cut %d bytes off the end of %s: a line whose write never completed (its writer was killed, or the disk filled), so its record was never acknowledged and its action did not run; sha256 of the bytes cut: %s",
		partial, filepath.Base(name), hex.EncodeToString(sum[:]))}
	return nil
}

// followRotation follows the files another process rotated in after the
// one a.f was, and makes the active file at a.path a.f.
func (a *Log) followRotation() error {
	fi, err := a.f.Stat()
	if err != nil {
		return &WriteError{Op: "read the log's end", Err: err}
	}
	files, err := listFiles(a.path)
	if err != nil {
		return &WriteError{Op: "read the log's end", Err: err}
	}
	rotated := false
	for _, lf := range files[:len(files)-1] {
		if st, err := os.Stat(lf.path); err == nil && os.SameFile(st, fi) {
			rotated = true
		}
	}
	if !rotated {
		return a.stop("read the log's end", &DamagedError{File: a.path, LastSeq: a.ch.seq, LastHash: a.ch.hash,
			Reason: "the active file was moved away or removed while this process appended to it (by 'actiongw audit seal', or by hand)"})
	}
	for _, lf := range files[:len(files)-1] {
		if lf.first <= a.ch.seq {
			continue
		}
		if err := openRotated(context.Background(), &a.ch, lf); err != nil {
			return a.stop("read the log's end", err)
		}
	}
	f, err := openActive(a.path)
	if err != nil {
		return &WriteError{Op: "read the log's end", Err: err}
	}
	if err := a.activate(f); err != nil {
		return err
	}
	return a.catchUp(f, a.path, a.fi.Size(), true)
}

// reopenHead opens the head file again if it was removed or replaced.
func (a *Log) reopenHead() error {
	hi, err := a.head.Stat()
	if err != nil {
		return &WriteError{Op: "head", Err: err}
	}
	if st, err := os.Stat(headPath(a.path)); err == nil && os.SameFile(st, hi) {
		return nil
	}
	h, err := os.OpenFile(headPath(a.path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return &WriteError{Op: "head", Err: err}
	}
	a.head.Close()
	a.head = h
	return nil
}

// rotate renames the active file, once it holds RotateBytes, by its first
// record, and starts a new one, under the lock.
func (a *Log) rotate() error {
	if a.opts.RotateBytes <= 0 || a.size < a.opts.RotateBytes || a.first == 0 || a.torn != nil {
		return nil
	}
	dst := rotatedPath(a.path, a.first)
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s exists already", dst)
	}
	if err := os.Rename(a.path, dst); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(a.path)); err != nil {
		return err
	}
	// If this fails, the next sync finds no active file and creates it.
	f, err := openActive(a.path)
	if err != nil {
		return err
	}
	if err := a.activate(f); err != nil {
		return err
	}
	a.offerCheckpoint(true)
	return nil
}

// write appends recs (and a repair record first, if sync found a torn
// line) after a.ch, under the lock, syncs, and updates the head file.
func (a *Log) write(recs []*Record) error {
	if a.torn != nil {
		if err := a.f.Truncate(a.size); err != nil {
			return &WriteError{Op: "cut a torn line", Err: err}
		}
		recs = append([]*Record{a.torn}, recs...)
	}
	if len(recs) == 0 {
		return a.writeHead()
	}
	var buf bytes.Buffer
	hashes, macs := make([]string, len(recs)), make([]string, len(recs))
	ends := make([]int, len(recs)) // where each line ends in buf, newline included
	seq, prev := a.ch.seq, a.ch.hash
	for i, r := range recs {
		seq++
		r.Seq, r.Prev = seq, prev
		if r.Owner == "" {
			r.Owner = owner.Self()
		}
		if r.Time.IsZero() {
			r.Time = time.Now().UTC()
		}
		var err error
		if hashes[i], macs[i], err = encodeRecord(&buf, r, a.ch.sign); err != nil {
			return err
		}
		prev, ends[i] = hashes[i], buf.Len()
	}
	n, err := a.f.Write(buf.Bytes())
	if err != nil {
		if n > 0 {
			if terr := a.f.Truncate(a.size); terr != nil {
				return a.stop("write", fmt.Errorf("%w; undoing the partial write failed too: %w", err, terr))
			}
		}
		return &WriteError{Op: "write", Err: err}
	}
	if err := a.f.Sync(); err != nil {
		// What a failed fsync left on disk is unknown.
		return a.stop("sync", err)
	}
	a.torn = nil
	for i, r := range recs {
		a.ch.appended(r, hashes[i], macs[i], a.path, a.lines+i+1)
	}
	if a.opts.Written != nil {
		start := 0
		for _, end := range ends {
			a.opts.Written(buf.Bytes()[start : end-1])
			start = end
		}
	}
	a.size += int64(n)
	a.lines += len(recs)
	if a.first == 0 {
		a.first = recs[0].Seq
	}
	if err := a.writeHead(); err != nil {
		return err
	}
	a.unsaved += len(recs)
	a.offerCheckpoint(false)
	return nil
}

func (a *Log) writeHead() error {
	_, err := a.head.WriteAt(encodeHead(a.ch.seq, a.ch.hash, a.ch.sign), 0)
	switch {
	case err == nil && a.heads != nil:
		a.heads.offer(a.head)
	case err == nil:
		err = a.head.Sync()
	}
	if err != nil {
		// The records are on disk; a head that cannot be kept up would
		// hide records cut off the end.
		return a.stop("head", err)
	}
	return nil
}

// checkpoint is the last record, if it is keyed.
func (a *Log) checkpoint() (Checkpoint, bool) {
	if a.opts.Key == nil || a.ch.mac == "" {
		return Checkpoint{}, false
	}
	return Checkpoint{Seq: a.ch.seq, MAC: a.ch.mac}, true
}

// offerCheckpoint hands the saver the current checkpoint when it is due,
// or now.
func (a *Log) offerCheckpoint(now bool) {
	cp, ok := a.checkpoint()
	if a.saver == nil || !ok {
		return
	}
	if now || a.unsaved >= checkpointEvery || time.Since(a.savedAt) >= checkpointInterval {
		a.saver.offer(cp)
		a.unsaved, a.savedAt = 0, time.Now()
	}
}

// Close closes the files, once the appends under way are done, and saves
// a last checkpoint of the log as it is on disk.
func (a *Log) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()

	if a.stopVerify != nil {
		a.stopVerify(ErrClosed)
		<-a.verified
	}
	a.commitMu.Lock()
	defer a.commitMu.Unlock()
	if a.saver != nil {
		a.saver.stop()
		// Only a checkpoint of the log as it is now: another process
		// may have appended, or sealed it.
		if a.failed == nil && lockFile(a.lock, true) == nil {
			if a.sync() == nil {
				if cp, ok := a.checkpoint(); ok {
					a.opts.SaveCheckpoint(cp)
				}
			}
			unlockFile(a.lock)
		}
	}
	errs := []error{a.stopHeads(), a.closeFiles()}
	a.f = nil
	return errors.Join(errs...)
}

// stopHeads ends the head syncer and syncs the head file itself.
func (a *Log) stopHeads() error {
	if a.heads == nil {
		return nil
	}
	err := a.heads.stop()
	a.heads = nil
	if err == nil && a.head != nil {
		err = a.head.Sync()
	}
	return err
}

func (a *Log) closeFiles() error {
	var errs []error
	for _, f := range []*os.File{a.f, a.head, a.lock} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// saver runs SaveCheckpoint off the appends' path: it keeps only the
// latest checkpoint offered.
type saver struct {
	ch   chan Checkpoint
	done chan struct{}
}

func startSaver(save func(Checkpoint)) *saver {
	s := &saver{ch: make(chan Checkpoint, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for cp := range s.ch {
			save(cp)
		}
	}()
	return s
}

// offer replaces the checkpoint waiting, if any, with cp. Its callers
// hold commitMu, so the send finds room.
func (s *saver) offer(cp Checkpoint) {
	select {
	case <-s.ch:
	default:
	}
	s.ch <- cp
}

// stop saves the checkpoint waiting, if any, and ends the goroutine.
func (s *saver) stop() {
	close(s.ch)
	<-s.done
}

// headSyncer fsyncs the head file, written under the lock, on its own
// goroutine: the Append that wrote it has returned. Several writes before
// it gets to them cost one fsync. A head file that reopenHead closed
// meanwhile is not synced (os.ErrClosed): it was removed or replaced, and
// the new one is synced after its first write.
type headSyncer struct {
	wake chan struct{}
	quit chan struct{}
	done chan struct{}

	mu  sync.Mutex
	f   *os.File // to sync; nil when nothing waits
	err error    // the first fsync that failed
}

func startHeadSyncer() *headSyncer {
	h := &headSyncer{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			select {
			case <-h.wake:
				h.syncWaiting()
			case <-h.quit:
				h.syncWaiting()
				return
			}
		}
	}()
	return h
}

// offer has f synced soon. Its callers hold commitMu.
func (h *headSyncer) offer(f *os.File) {
	h.mu.Lock()
	h.f = f
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *headSyncer) syncWaiting() {
	h.mu.Lock()
	f := h.f
	h.f = nil
	h.mu.Unlock()
	if f == nil {
		return
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		h.mu.Lock()
		if h.err == nil {
			h.err = err
		}
		h.mu.Unlock()
	}
}

// failure is the first fsync of the head file that failed, if any: what
// a failed fsync left on disk is unknown, so the log stops.
func (h *headSyncer) failure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// stop syncs what waits, ends the goroutine, and returns failure.
func (h *headSyncer) stop() error {
	close(h.quit)
	<-h.done
	return h.failure()
}
