package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// OpenWith reads only the last resumeLines records of a longer log: start-up
// then costs the same with a day's history as with none. The head file
// (which lags by at most maxHeadLag records), the last records' MACs, and
// a checkpoint among them are checked before OpenWith returns; the whole
// chain, and a checkpoint older than those records, are verified on a
// goroutine of the Log (see backgroundVerify), which stops every Append
// with the damage it finds.
const resumeLines = ringSize

// tailStart returns the offset in f (size bytes) where its last n
// complete lines begin, and how many complete lines that is: fewer than n
// when the file holds fewer, from offset 0.
func tailStart(f io.ReaderAt, size int64, n int) (off int64, lines int, err error) {
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	seenLast := false // the newline that ends the last complete line
	for end > 0 {
		start := max(0, end-chunk)
		b := buf[:end-start]
		if _, err := f.ReadAt(b, start); err != nil {
			return 0, 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			if !seenLast {
				seenLast = true
				continue
			}
			lines++
			if lines == n {
				return start + int64(i) + 1, lines, nil
			}
		}
		end = start
	}
	if seenLast {
		lines++
	}
	return 0, lines, nil
}

// resumeChain is readChain for a log of more than resumeLines records: it
// follows its last resumeLines records only, from the file among files
// (oldest first, the active file a.f last) where they begin. It reports
// false, having read nothing, when the log holds fewer: readChain reads it
// whole.
func (a *Log) resumeChain(ctx context.Context, files []logFile) (bool, error) {
	type part struct {
		lf   logFile
		f    *os.File
		size int64
		off  int64
	}
	var parts []part
	defer func() {
		for _, p := range parts {
			if p.f != a.f {
				p.f.Close()
			}
		}
	}()
	need := resumeLines
	for i := len(files) - 1; i >= 0 && need > 0; i-- {
		p := part{lf: files[i], f: a.f, size: a.fi.Size()}
		if i < len(files)-1 {
			f, err := os.Open(files[i].path)
			if err != nil {
				return false, fmt.Errorf("audit log: %w", err)
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return false, fmt.Errorf("audit log: %w", err)
			}
			p.f, p.size = f, fi.Size()
		}
		off, got, err := tailStart(p.f, p.size, need)
		if err != nil {
			return false, fmt.Errorf("audit log: %w", err)
		}
		p.off, need = off, need-got
		parts = append([]part{p}, parts...)
		if need > 0 && i == 0 {
			return false, nil // the whole log is shorter
		}
	}
	if need > 0 {
		return false, nil
	}
	// The first record read continues a chain this process does not
	// read: it is taken as it says, its MAC checked. The goroutine that
	// verifies the whole chain checks that it does continue it.
	first := parts[0]
	r := newLineReader(io.NewSectionReader(first.f, first.off, first.size-first.off))
	b, err := r.next()
	if err != nil {
		return false, &DamagedError{File: first.lf.path, Reason: fmt.Sprintf("the record where start-up resumes the chain cannot be read: %v", err)}
	}
	var l struct {
		Seq  int64  `json:"seq"`
		Prev string `json:"prev"`
	}
	if err := json.Unmarshal(b, &l); err != nil || l.Seq < 1 {
		return false, &DamagedError{File: first.lf.path, Reason: "the record where start-up resumes the chain is not a record"}
	}
	base := 0 // the line number of first.off in its file
	if first.off > 0 {
		n, err := countLines(first.f, first.off)
		if err != nil {
			return false, fmt.Errorf("audit log: %w", err)
		}
		base = n
	}
	a.ch.seq, a.ch.hash = l.Seq-1, l.Prev
	// keyedFrom becomes the first keyed record read, at or after the one
	// that began the keyed part.
	if err := a.ch.add(b, first.lf.path, base+1); err != nil {
		return false, err
	}
	for i, p := range parts {
		off, line := p.off, 0
		if i == 0 {
			off, line = p.off+r.off, base+1
		}
		end, lines, partial, err := follow(ctx, &a.ch, p.f, p.lf.path, off, p.size, line, false)
		if err != nil {
			return false, err
		}
		if p.f == a.f {
			a.setRead(end, lines)
		} else if partial > 0 {
			return false, &DamagedError{File: p.lf.path, Line: lines + 1, LastSeq: a.ch.seq, LastHash: a.ch.hash,
				Reason: "an incomplete last line in a rotated file, which no writer appends to"}
		}
	}
	return true, nil
}

// countLines counts the lines in the first n bytes of f.
func countLines(f io.ReaderAt, n int64) (int, error) {
	buf := make([]byte, 256<<10)
	lines := 0
	for off := int64(0); off < n; {
		b := buf[:min(int64(len(buf)), n-off)]
		if _, err := f.ReadAt(b, off); err != nil {
			return 0, err
		}
		lines += bytes.Count(b, []byte{'\n'})
		off += int64(len(b))
	}
	return lines, nil
}

// backgroundVerify verifies the whole chain of a log OpenWith resumed, as
// VerifyWith does, with the key and the checkpoint OpenWith was given;
// then it records as interrupted the actions whose intents, older than
// the records OpenWith read, have no outcome and whose process ended. It
// runs on its own goroutine, which Close stops. Damage stops every later
// Append with it (the actions are refused, as at a start that finds it),
// and is logged; WaitVerified returns it.
func (a *Log) backgroundVerify(ctx context.Context) {
	defer close(a.verified)
	err := a.verifyWhole(ctx)
	if err == nil {
		a.opts.Logger.Info("audit log: the whole chain verified", "path", a.path)
		return
	}
	if ctx.Err() != nil {
		a.verifyErr = fmt.Errorf("audit log: the verification of the whole chain was stopped: %w", context.Cause(ctx))
		return
	}
	a.verifyErr = err
	a.opts.Logger.Error("audit log: the whole chain failed verification; every action is refused until it is repaired", "path", a.path, "error", err)
	a.commitMu.Lock()
	defer a.commitMu.Unlock()
	if a.failed == nil {
		a.stop("verify", err)
	}
}

func (a *Log) verifyWhole(ctx context.Context) error {
	snap, err := takeSnapshot(a.path, true)
	if err != nil {
		return err
	}
	defer snap.close()
	pending := map[string]pendingIntent{}
	if _, err := snap.check(ctx, VerifyOptions{Key: a.opts.Key, Checkpoint: a.opts.Checkpoint}, pending); err != nil {
		return err
	}
	a.commitMu.Lock()
	defer a.commitMu.Unlock()
	if a.failed != nil || a.f == nil {
		return nil
	}
	if err := lockFile(a.lock, true); err != nil {
		return &WriteError{Op: "lock", Err: err}
	}
	defer unlockFile(a.lock)
	if err := a.sync(); err != nil {
		return err
	}
	resolved := a.ch.resolved
	a.ch.resolved = nil
	var dead []pendingIntent
	for h, p := range pending {
		_, inTail := a.ch.pending[h] // RecordInterrupted's, at start
		if !inTail && !resolved[h] && !p.owner.Alive() {
			dead = append(dead, p)
		}
	}
	recs, err := a.writeInterrupted(dead)
	for _, r := range recs {
		a.opts.Logger.Warn("an action of a server that died is recorded as interrupted", "handle", r.Handle, "tool", r.Tool, "target", r.Target)
	}
	if err != nil {
		a.opts.Logger.Error("the interrupted actions could not all be recorded", "error", err)
	}
	return nil
}

// WaitVerified waits until the verification of the whole chain that
// OpenWith started (for a log longer than it reads at start) has ended,
// or ctx, and returns the damage it found, if any. For a log OpenWith
// read whole it returns nil at once.
func (a *Log) WaitVerified(ctx context.Context) error {
	select {
	case <-a.verified:
		return a.verifyErr
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
