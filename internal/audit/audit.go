package audit

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Record is one line of the audit log: an "intent" before an action
// runs, an "outcome" after. String fields pass the redactor before they are
// written.
type Record struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Kind string    `json:"kind"` // intent | outcome
	// Prev is the hex sha256 of the previous line, "" on the first.
	Prev string `json:"prev"`

	Handle string `json:"handle"`
	Tool   string `json:"tool"`
	Target string `json:"target"`

	// Intent.
	Command  string `json:"command,omitempty"`
	Method   string `json:"method,omitempty"`
	Path     string `json:"path,omitempty"`
	Decision string `json:"decision,omitempty"` // allow | deny
	Rule     string `json:"rule,omitempty"`

	// Outcome.
	Status        string            `json:"status,omitempty"`
	ExitCode      *int              `json:"exit_code,omitempty"`
	Signal        string            `json:"signal,omitempty"`
	HTTPStatus    int               `json:"http_status,omitempty"`
	Streams       map[string]Stream `json:"streams,omitempty"`
	DurationMS    int64             `json:"duration_ms,omitempty"`
	Reason        string            `json:"reason,omitempty"`
	RemoteStopped *bool             `json:"remote_stopped,omitempty"`
}

// Stream is what the audit keeps of one stream: its size and hash.
type Stream struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Log is an append-only JSON Lines file in which each record carries
// the hash of the line before it. A small head file beside it holds the
// hash of the last line, so removing or editing the last line shows too.
//
// Appends that arrive together share one fsync (group commit): each Append
// returns only once its own line, and the head file, are on disk.
type Log struct {
	path   string
	redact func(string) string
	f      *os.File
	head   *os.File

	mu     sync.Mutex // guards the fields below and writes to f
	size   int64
	seq    int64
	prev   string
	failed error // set once the file can no longer be trusted to be whole

	syncMu sync.Mutex // held by the one goroutine syncing for a group
	synced int64      // bytes known to be on disk, under syncMu
}

// headRecord is the head file's content, padded to a fixed size so it is
// rewritten in place.
type headRecord struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

const headSize = 128

// Open opens (creating, mode 0600) the audit log at path and its head
// file path+".head". redact is applied to every string field of a record.
// It verifies the whole chain first and refuses a log that fails.
func Open(path string, redact func(string) string) (*Log, error) {
	n, last, err := verifyLog(path, false)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (see 'actiongw audit verify')", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	head, err := os.OpenFile(path+".head", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		head.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return &Log{path: path, redact: redact, f: f, head: head,
		size: st.Size(), synced: st.Size(), seq: int64(n), prev: last}, nil
}

func readHead(path string) (headRecord, error) {
	var h headRecord
	raw, err := os.ReadFile(path + ".head")
	if err != nil {
		return h, err
	}
	if raw = bytes.TrimRight(raw, " \n\x00"); len(raw) > 0 {
		if err := json.Unmarshal(raw, &h); err != nil {
			return h, &Error{0, "head file is damaged"}
		}
	}
	return h, nil
}

func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// Append writes rec as one line, chained to the previous one, and returns
// once it is on disk. On error nothing of rec stays in the file, and the
// action it describes must not go on.
func (a *Log) Append(rec *Record) error {
	r := *rec
	for _, s := range []*string{&r.Handle, &r.Tool, &r.Target, &r.Command, &r.Method, &r.Path, &r.Rule, &r.Status, &r.Reason, &r.Signal} {
		*s = a.redact(*s)
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}

	a.mu.Lock()
	if a.failed != nil {
		a.mu.Unlock()
		return a.failed
	}
	r.Seq, r.Prev = a.seq+1, a.prev
	line, err := json.Marshal(&r)
	if err == nil {
		var n int
		n, err = a.f.Write(append(line, '\n'))
		if err != nil && n > 0 {
			// Cut back a partial line; if that fails, no later line can
			// be trusted to chain.
			if terr := a.f.Truncate(a.size); terr != nil {
				a.failed = fmt.Errorf("audit log: cannot undo a failed write: %w", terr)
			}
		}
	}
	if err != nil {
		a.mu.Unlock()
		return fmt.Errorf("audit log: %w", err)
	}
	a.size += int64(len(line)) + 1
	a.seq, a.prev = r.Seq, lineHash(line)
	end := a.size
	a.mu.Unlock()

	if err := a.syncTo(end); err != nil {
		return err
	}
	*rec = r
	return nil
}

// syncTo returns once the first end bytes and a head file at least that
// far are on disk; one caller syncs for everyone waiting.
func (a *Log) syncTo(end int64) error {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.synced >= end {
		return nil
	}
	a.mu.Lock()
	size, h, failed := a.size, headRecord{Seq: a.seq, Hash: a.prev}, a.failed
	a.mu.Unlock()
	if failed != nil {
		return failed
	}
	err := a.f.Sync()
	if err == nil {
		err = a.writeHead(h)
	}
	if err != nil {
		// What a failed fsync left on disk is unknown: stop here.
		err = fmt.Errorf("audit log: sync failed, refusing further actions: %w", err)
		a.mu.Lock()
		a.failed = err
		a.mu.Unlock()
		return err
	}
	a.synced = size
	return nil
}

func (a *Log) writeHead(h headRecord) error {
	b, _ := json.Marshal(h)
	b = append(b, bytes.Repeat([]byte(" "), headSize-1-len(b))...)
	if _, err := a.head.WriteAt(append(b, '\n'), 0); err != nil {
		return err
	}
	return a.head.Sync()
}

// Close closes the files.
func (a *Log) Close() error {
	return errors.Join(a.f.Close(), a.head.Close())
}

// Error names the first line of an audit log that fails verification.
type Error struct {
	Line   int // 1-based; 0 for the head file
	Reason string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "audit log: " + e.Reason
	}
	return fmt.Sprintf("audit log line %d: %s", e.Line, e.Reason)
}

// Verify checks the chain of the log at path and its head file and
// returns the number of records, or an *Error naming the first bad
// line.
func Verify(path string) (int, error) {
	n, _, err := verifyLog(path, true)
	return n, err
}

// verifyLog checks the chain and returns the record count and the hash of
// the last line. With strictHead the head file must name the last line;
// without, it may lag behind (a crash between the two syncs of a group).
func verifyLog(path string, strictHead bool) (int, string, error) {
	h, err := readHead(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	n, prev, headSeen := 0, "", h.Seq == 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return n - 1, "", &Error{n, "not a JSON record: " + err.Error()}
		}
		switch {
		case rec.Seq != int64(n):
			return n - 1, "", &Error{n, fmt.Sprintf("sequence %d where %d belongs: a record was removed, inserted or reordered", rec.Seq, n)}
		case rec.Prev != prev:
			// Sequence numbers are intact, so line n-1 itself changed.
			return n - 2, "", &Error{n - 1, fmt.Sprintf("edited: its hash does not match the one line %d recorded", n)}
		}
		prev = lineHash(line)
		if int64(n) == h.Seq {
			headSeen = prev == h.Hash
		}
	}
	if err := sc.Err(); err != nil {
		return n, "", &Error{n + 1, err.Error()}
	}
	switch {
	case strictHead && (h.Seq != int64(n) || h.Hash != prev):
		return n, "", &Error{n, fmt.Sprintf("the head file records %d records ending in another hash: the last line was edited, or records were removed from the end", h.Seq)}
	case !headSeen:
		return n, "", &Error{n, fmt.Sprintf("the head file records %d records; this log does not contain them unchanged: records were removed from the end or the last line was edited", h.Seq)}
	}
	return n, prev, nil
}

// Path is where the audit log of a state directory lives.
func Path(stateDir string) string {
	return filepath.Join(stateDir, "audit.jsonl")
}
