package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/actiongw/actiongw/internal/owner"
)

// DamagedError reports the first place where an audit log fails
// verification. A log with one is refused by Open until it is sealed
// (Seal, `actiongw audit seal`): its files are moved aside and a new chain
// starts that names them.
type DamagedError struct {
	// File is the file at fault: a log file, its head file, or the
	// keyring checkpoint's description.
	File string
	// Line is 1-based within File; 0 when the fault is not one line.
	Line   int
	Reason string
	// LastSeq and LastHash are the last record before the damage (0 and ""
	// when there is none): the log is good up to it.
	LastSeq  int64
	LastHash string
}

func (e *DamagedError) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s line %d", e.File, e.Line)
	}
	return fmt.Sprintf("audit log %s: %s; to keep the damaged files aside and start a new chain, run: actiongw audit seal", where, e.Reason)
}

// errPartial reports a last line without its newline: a write in progress,
// or one that never completed.
var errPartial = errors.New("incomplete last line")

// longLineError reports a line longer than MaxLineBytes, which was skipped
// without being held in memory.
type longLineError struct{ n int64 }

func (e *longLineError) Error() string {
	return fmt.Sprintf("the line is %d bytes or more, longer than any record actiongw writes (%d)", e.n, MaxLineBytes)
}

// lineReader reads a log's lines, never holding more than MaxLineBytes.
type lineReader struct {
	br  *bufio.Reader
	off int64 // of the next line, from where the reader started
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, MaxLineBytes+1)}
}

// next returns the next line, without its newline, valid until the next
// call. At the end it returns io.EOF; before that, errPartial with the
// bytes of a last line that has no newline (off stays at its start). A
// line that is too long is skipped and reported as a *longLineError.
func (r *lineReader) next() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	switch {
	case err == nil:
		r.off += int64(len(line))
		return line[:len(line)-1], nil
	case errors.Is(err, bufio.ErrBufferFull):
		n := int64(len(line))
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = r.br.ReadSlice('\n')
			n += int64(len(line))
		}
		r.off += n
		if err != nil && err != io.EOF {
			return nil, err
		}
		return nil, &longLineError{n}
	case err == io.EOF && len(line) > 0:
		return line, errPartial
	}
	return nil, err
}

// ringSize is how many of the last records' hashes a chain keeps, to
// check a head file that lags behind the log.
const ringSize = 1024

// chain follows a log record by record and checks that each one continues
// it: its seq, the hash of the line before, its MAC.
type chain struct {
	// sign checks MACs; nil leaves them unchecked.
	sign *signer

	seq  int64  // of the last record; 0 before the first
	hash string // of the last line
	mac  string // of the last record; "" when unkeyed
	// keyedFrom is the seq of the first record with a MAC; 0 when none.
	keyedFrom int64
	// sealed is the first record's, when the chain began with a seal.
	sealed *Sealed
	// first is the seq of the first record seen (a chain followed from the
	// middle of a log does not start at 1).
	first int64

	// Where the last record is, and the one before (for "edited").
	file, prevFile string
	line, prevLine int
	prevSeq        int64
	prevHash       string

	recent [ringSize]struct {
		seq  int64
		hash string
	}
	// marks holds a seq whose hash and MAC are wanted (a checkpoint's);
	// add fills them in as it passes.
	marks map[int64]*mark
	// pending holds, by handle, the intents that have no outcome yet; nil
	// when nobody asks.
	pending map[string]pendingIntent
	// resolved holds the handles of the outcomes seen while the whole
	// chain is verified in the background (their intents may be older
	// than pending knows); nil otherwise.
	resolved map[string]bool
}

type mark struct {
	seen      bool
	hash, mac string
}

// pendingIntent is what is known of an action whose outcome is not
// written yet.
type pendingIntent struct {
	seq                  int64
	owner                owner.ID
	handle, tool, target string
}

// link is what the chain checks and follows of a record: decoding only
// these fields keeps reading a log fast.
type link struct {
	Seq      int64    `json:"seq"`
	Kind     Kind     `json:"kind"`
	Prev     string   `json:"prev"`
	Owner    owner.ID `json:"owner"`
	Handle   string   `json:"handle"`
	Tool     string   `json:"tool"`
	Target   string   `json:"target"`
	Decision string   `json:"decision"`
	KeyID    string   `json:"key_id"`
	Sealed   *Sealed  `json:"sealed"`
	MAC      string   `json:"mac"`
}

// add checks line, the next line of file (line number n), and takes it
// into the chain. It returns a *DamagedError for a line that does not
// continue the chain.
func (c *chain) add(line []byte, file string, n int) error {
	bad := func(format string, a ...any) error {
		return &DamagedError{File: file, Line: n, Reason: fmt.Sprintf(format, a...), LastSeq: c.seq, LastHash: c.hash}
	}
	var l link
	if err := json.Unmarshal(line, &l); err != nil {
		return bad("not a JSON record: %v", err)
	}
	rec := Record{Seq: l.Seq, Kind: l.Kind, Prev: l.Prev, Owner: l.Owner, Handle: l.Handle, Tool: l.Tool,
		Target: l.Target, Decision: l.Decision, KeyID: l.KeyID, Sealed: l.Sealed, MAC: l.MAC}
	mac, body, keyed := splitMAC(line)
	switch {
	case !keyed && rec.MAC != "":
		return bad("its mac is not at the end of the line, where actiongw writes it")
	case rec.Kind == KindSeal && (rec.Seq != 1 || rec.Prev != "" || rec.Sealed == nil):
		return bad("a seal record that does not start a chain")
	case rec.Kind == KindSeal && c.seq != 0:
		return bad("a seal record where record %d belongs: a chain is sealed by moving all its files aside", c.seq+1)
	case rec.Seq != c.seq+1:
		return bad("sequence %d where %d belongs: a record was removed, inserted or reordered", rec.Seq, c.seq+1)
	case rec.Prev != c.hash && c.seq == 0:
		return bad("the first record of the chain names a record before it: the records before it were removed")
	case rec.Prev != c.hash:
		// The seq is right, so the line before changed (or this one's
		// prev did, which no writer does).
		return &DamagedError{File: c.file, Line: c.line, LastSeq: c.prevSeq, LastHash: c.prevHash,
			Reason: fmt.Sprintf("edited: its hash does not match the one record %d records", rec.Seq)}
	case keyed && c.sign != nil && !hmacEqual(mac, c.sign.mac(body, []byte("}"))):
		if rec.KeyID != "" && rec.KeyID != c.sign.id {
			return bad("its mac does not match: this log was keyed with another key (id %s; the key given has id %s), was the audit key in the keyring replaced?", rec.KeyID, c.sign.id)
		}
		return bad("its mac does not match: the record was forged or edited, or the key given is not the one that wrote it")
	case !keyed && c.keyedFrom != 0:
		return bad("it has no mac, though every record from %d on must: it was written without the key", c.keyedFrom)
	}
	if keyed && c.keyedFrom == 0 {
		c.keyedFrom = rec.Seq
	}
	if rec.Kind == KindSeal {
		c.sealed = rec.Sealed
	}
	c.appended(&rec, lineHash(line), mac, file, n)
	return nil
}

// appended takes into the chain a record known to continue it (one this
// process wrote, or one add checked).
func (c *chain) appended(rec *Record, hash, mac, file string, n int) {
	if c.first == 0 {
		c.first = rec.Seq
	}
	c.prevFile, c.prevLine, c.prevSeq, c.prevHash = c.file, c.line, c.seq, c.hash
	c.file, c.line = file, n
	c.seq, c.hash, c.mac = rec.Seq, hash, mac
	if mac != "" && c.keyedFrom == 0 {
		c.keyedFrom = rec.Seq
	}
	slot := &c.recent[rec.Seq%ringSize]
	slot.seq, slot.hash = rec.Seq, hash
	if m := c.marks[rec.Seq]; m != nil {
		m.seen, m.hash, m.mac = true, hash, mac
	}
	if c.resolved != nil && rec.Kind == KindOutcome && rec.Handle != "" {
		c.resolved[rec.Handle] = true
	}
	if c.pending == nil {
		return
	}
	switch {
	case rec.Kind == KindIntent && rec.Handle != "" && rec.Decision != "deny":
		c.pending[rec.Handle] = pendingIntent{seq: rec.Seq, owner: rec.Owner, handle: rec.Handle, tool: rec.Tool, target: rec.Target}
	case rec.Kind == KindOutcome && rec.Handle != "":
		delete(c.pending, rec.Handle)
	}
}

// hashOf returns the hash of record seq if it is among the last ringSize.
func (c *chain) hashOf(seq int64) (string, bool) {
	slot := c.recent[seq%ringSize]
	return slot.hash, slot.seq == seq && seq > 0
}
