package audit

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// VerifyOptions say what VerifyWith and Seal check beyond the files.
type VerifyOptions struct {
	// Key checks the MACs of the keyed records and of the head file; nil
	// leaves them unchecked, and the Report says what that leaves open.
	Key Key
	// Checkpoint is the one saved outside the state directory; nil when
	// there is none.
	Checkpoint *Checkpoint
}

// Report is what VerifyWith checked and so proved; String says it in
// sentences. On error it covers the log up to the damage.
type Report struct {
	Path  string
	Files []string // checked, oldest first
	// First and Last are the seqs of the first and last record; 0 in an
	// empty log.
	First, Last int64
	// Sealed is set when the chain begins with a seal record.
	Sealed *Sealed
	// KeyedFrom is the seq of the first record with a MAC; 0 when none.
	KeyedFrom int64
	// Key is whether MACs were checked.
	Key bool
	// HeadSeq is the record the head file names; HeadMAC whether its MAC
	// was checked.
	HeadSeq int64
	HeadMAC bool
	// Checkpoint is the checkpoint the log was found to contain, nil if
	// none was given.
	Checkpoint *Checkpoint
	// Torn is the size of an incomplete last line: a write that never
	// completed, which the next OpenWith cuts off.
	Torn int64
}

// Verify checks the log at path without a key, as VerifyWith does, and
// returns the number of records.
func Verify(path string) (int, error) {
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{})
	if rep == nil {
		return 0, err
	}
	return int(rep.Records()), err
}

// VerifyWith checks the chain of the log at path through all its files,
// its head file and, as opts allow, its MACs and a checkpoint. It reads
// any line length without holding the line; it returns a *DamagedError
// for the first fault. It holds the lock only while it looks at the files,
// so appends go on meanwhile; it checks the log as it was then.
func VerifyWith(ctx context.Context, path string, opts VerifyOptions) (*Report, error) {
	snap, err := takeSnapshot(path, true)
	if err != nil {
		return nil, err
	}
	defer snap.close()
	return snap.verify(ctx, opts)
}

// snapshot is a log's files as they were at one moment, under the lock:
// open, with their sizes then, and the head file's content.
type snapshot struct {
	path  string
	head  headRecord
	files []snapFile
}

type snapFile struct {
	logFile
	f    *os.File
	size int64
}

// takeSnapshot looks at the log's files, under a shared lock if lock is
// set (none is needed for a log never opened to append: no lock file).
func takeSnapshot(path string, lock bool) (s *snapshot, err error) {
	if lock {
		lf, err := os.Open(lockPath(path))
		switch {
		case err == nil:
			defer lf.Close()
			if err := lockFile(lf, false); err != nil {
				return nil, fmt.Errorf("audit log: lock: %w", err)
			}
			defer unlockFile(lf)
		case !os.IsNotExist(err):
			return nil, fmt.Errorf("audit log: %w", err)
		}
	}
	s = &snapshot{path: path}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if s.head, err = readHead(path); err != nil {
		return nil, err
	}
	files, err := listFiles(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	for _, lf := range files {
		f, err := os.Open(lf.path)
		if os.IsNotExist(err) && lf.first == 0 {
			continue // no active file: none was created, or it was just rotated
		}
		if err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("audit log: %w", err)
		}
		s.files = append(s.files, snapFile{lf, f, fi.Size()})
	}
	return s, nil
}

func (s *snapshot) close() {
	for _, f := range s.files {
		f.f.Close()
	}
}

// verify follows the snapshot's files and checks the head file and the
// checkpoint.
func (s *snapshot) verify(ctx context.Context, opts VerifyOptions) (*Report, error) {
	return s.check(ctx, opts, nil)
}

// check is verify that also fills pending, if not nil, with the intents
// that have no outcome.
func (s *snapshot) check(ctx context.Context, opts VerifyOptions, pending map[string]pendingIntent) (*Report, error) {
	c := &chain{sign: newSigner(opts.Key), marks: map[int64]*mark{}, pending: pending}
	if s.head.Seq > 0 {
		c.marks[s.head.Seq] = &mark{}
	}
	if cp := opts.Checkpoint; cp != nil {
		c.marks[cp.Seq] = &mark{}
	}
	rep := &Report{Path: s.path, Key: opts.Key != nil, HeadSeq: s.head.Seq}
	err := s.follow(ctx, c, rep)
	rep.First, rep.Last, rep.KeyedFrom, rep.Sealed = c.first, c.seq, c.keyedFrom, c.sealed
	if err != nil {
		return rep, err
	}
	err = checkHead(c, s.head, s.path, func(seq int64) (string, bool) {
		if m := c.marks[seq]; m != nil && m.seen {
			return m.hash, true
		}
		return "", false
	})
	if err != nil {
		return rep, err
	}
	rep.HeadMAC = c.sign != nil && s.head.MAC != ""
	if cp := opts.Checkpoint; cp != nil {
		if err := checkCheckpoint(c, cp, s.path); err != nil {
			return rep, err
		}
		rep.Checkpoint = cp
	}
	return rep, nil
}

func (s *snapshot) follow(ctx context.Context, c *chain, rep *Report) error {
	for i, sf := range s.files {
		rep.Files = append(rep.Files, sf.path)
		if sf.first != 0 {
			if err := readRotated(ctx, c, sf.logFile, sf.f, sf.size); err != nil {
				return err
			}
			continue
		}
		_, _, partial, err := follow(ctx, c, sf.f, sf.path, 0, sf.size, 0, c.seq == 0)
		if err != nil {
			return err
		}
		if i != len(s.files)-1 {
			return fmt.Errorf("audit log: internal error: the active file is not the last")
		}
		rep.Torn = partial
	}
	return nil
}

// checkCheckpoint checks that the chain c followed contains the record cp
// names, with its MAC.
func checkCheckpoint(c *chain, cp *Checkpoint, path string) error {
	bad := func(format string, a ...any) error {
		return &DamagedError{File: path, Reason: fmt.Sprintf(format, a...), LastSeq: c.seq, LastHash: c.hash}
	}
	m := c.marks[cp.Seq]
	switch {
	case cp.Seq > c.seq:
		return bad("the log ends at record %d, but the checkpoint kept outside the state directory names record %d: records were removed (the log was emptied or cut short)", c.seq, cp.Seq)
	case m == nil || !m.seen:
		return bad("the checkpoint kept outside the state directory names record %d, which this chain does not hold: the log was replaced", cp.Seq)
	case !hmacEqual(m.mac, cp.MAC):
		return bad("record %d is not the one the checkpoint kept outside the state directory names: the log was replaced, or rewritten from there on", cp.Seq)
	}
	return nil
}

// Records is the number of records checked.
func (r *Report) Records() int64 {
	if r.Last == 0 {
		return 0
	}
	return r.Last - r.First + 1
}

// String says what the report proves, and what it leaves open, for a log
// that verified.
func (r *Report) String() string {
	var b strings.Builder
	n := r.Records()
	fmt.Fprintf(&b, "%s: %d records in %d files", r.Path, n, len(r.Files))
	if n > 0 {
		fmt.Fprintf(&b, " (records %d to %d)", r.First, r.Last)
	}
	b.WriteString("\n")
	if s := r.Sealed; s != nil {
		fmt.Fprintf(&b, "this chain starts with a seal record: the damaged log before it was moved to %s (good up to record %d)\n", s.Dir, s.LastSeq)
	}
	var proved, open []string
	proved = append(proved, "the hash chain is intact: no record was edited, removed, inserted or reordered, unless every hash after it was recomputed, which needs no key")
	switch {
	case r.KeyedFrom == 0 && r.Key:
		open = append(open, "no record carries a mac: the log was never written with the key, so anyone who could write the state directory could have rewritten it")
	case r.KeyedFrom == 0:
		open = append(open, "the log is not keyed: anyone who could write the state directory could have rewritten it with recomputed hashes")
	case r.Key:
		proved = append(proved, fmt.Sprintf("records %d to %d carry valid macs: nobody without the audit key wrote or changed them", r.KeyedFrom, r.Last))
		if r.KeyedFrom > r.First {
			open = append(open, fmt.Sprintf("records %d to %d predate the key: anyone who could write the state directory could have rewritten them with recomputed hashes", r.First, r.KeyedFrom-1))
		}
	default:
		open = append(open, fmt.Sprintf("records %d to %d carry macs, not checked: without the key, anyone who could write the state directory could have rewritten the whole log, or emptied it", r.KeyedFrom, r.Last))
	}
	switch {
	case r.HeadMAC:
		proved = append(proved, fmt.Sprintf("the head file, authenticated by the key, names record %d: no record up to it was cut off the end", r.HeadSeq))
	case r.HeadSeq > 0:
		proved = append(proved, fmt.Sprintf("the head file names record %d: no record up to it was cut off the end by accident (it is not authenticated: anyone could rewrite it)", r.HeadSeq))
	}
	if lag := r.Last - r.HeadSeq; r.Last > 0 && lag > 0 {
		open = append(open, fmt.Sprintf("the head file lags %d records behind (a writer died, or the machine stopped, before the head reached the disk; the next start updates it)", lag))
	}
	switch cp := r.Checkpoint; {
	case cp != nil:
		proved = append(proved, fmt.Sprintf("the log holds record %d as the checkpoint kept outside the state directory names it: it was not emptied, cut short before it, or replaced", cp.Seq))
		if r.Last > cp.Seq {
			open = append(open, fmt.Sprintf("records %d to %d, after the checkpoint, could have been cut off along with the head file replaced by an older copy", cp.Seq+1, r.Last))
		}
	case r.Key:
		open = append(open, "no checkpoint was given: that the log was not emptied, or cut short along with its head file replaced by an older copy")
	}
	if r.Torn > 0 {
		open = append(open, fmt.Sprintf("the last line is incomplete (%d bytes): a write that never completed, whose record was never acknowledged; the next start cuts it off", r.Torn))
	}
	b.WriteString("proved:\n")
	for _, s := range proved {
		fmt.Fprintf(&b, "  - %s\n", s)
	}
	if len(open) > 0 {
		b.WriteString("not proved:\n")
		for _, s := range open {
			fmt.Fprintf(&b, "  - %s\n", s)
		}
	}
	return b.String()
}
