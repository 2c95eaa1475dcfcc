package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// tailPoll is how often Tail looks for new records when it follows.
var tailPoll = 250 * time.Millisecond

// Tail calls fn with the last n records of the log at path, oldest first,
// reading back through the rotated files as far as it takes. With follow
// it then calls fn with every record appended, across rotations, until ctx
// is done. A line that is not a record comes to fn as an error that names
// its file and line; an error from fn ends Tail.
func Tail(ctx context.Context, path string, n int, follow bool, fn func(*Record, error) error) error {
	t := &tailer{path: path, fn: fn}
	defer t.close()
	// The active file first: if it is rotated from now on, it is among
	// the files listed below, and left out there.
	if err := t.open(); err != nil {
		return err
	}
	var last []line
	if t.f != nil {
		if err := t.each(keepLast(&last, n)); err != nil {
			return err
		}
	}
	files, err := listFiles(path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	for i := len(files) - 2; i >= 0 && len(last) < n; i-- {
		got, err := readLast(files[i].path, n-len(last), t.f)
		if err != nil {
			return err
		}
		last = append(got, last...)
	}
	for _, l := range last {
		if err := fn(l.record()); err != nil {
			return err
		}
	}
	if !follow {
		return nil
	}
	tick := time.NewTicker(tailPoll)
	defer tick.Stop()
	for {
		if err := t.poll(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// line is one line of a log file, or what was wrong with it.
type line struct {
	raw  []byte
	err  error
	file string
	n    int
}

// record parses the line.
func (l line) record() (*Record, error) {
	if l.err != nil {
		return nil, fmt.Errorf("%s line %d: %w", l.file, l.n, l.err)
	}
	var r Record
	if err := json.Unmarshal(l.raw, &r); err != nil {
		return nil, fmt.Errorf("%s line %d: not a record: %w", l.file, l.n, err)
	}
	return &r, nil
}

// keepLast returns a function that keeps the last n lines it is given in
// *out.
func keepLast(out *[]line, n int) func(line) error {
	return func(l line) error {
		if n == 0 {
			return nil
		}
		l.raw = bytes.Clone(l.raw)
		*out = append(*out, l)
		if len(*out) > n {
			*out = (*out)[1:]
		}
		return nil
	}
}

// tailer reads a log file as it grows.
type tailer struct {
	path string
	fn   func(*Record, error) error
	f    *os.File // nil until the file exists
	off  int64    // of the first line not read yet
	n    int      // lines read
	last []byte   // the last line read
	seq  int64    // its seq
}

func (t *tailer) open() error {
	f, err := os.Open(t.path)
	switch {
	case os.IsNotExist(err):
		return nil
	case err != nil:
		return fmt.Errorf("audit log: %w", err)
	}
	t.f, t.off, t.n = f, 0, 0
	return nil
}

func (t *tailer) close() {
	if t.f != nil {
		t.f.Close()
	}
}

// each calls fn with every complete line from t.off on.
func (t *tailer) each(fn func(line) error) error {
	r := newLineReader(io.NewSectionReader(t.f, t.off, 1<<62))
	defer func() {
		t.off += r.off
		var last struct{ Seq int64 }
		if json.Unmarshal(t.last, &last) == nil {
			t.seq = last.Seq
		}
	}()
	for {
		b, err := r.next()
		var long *longLineError
		switch {
		case err == io.EOF || errors.Is(err, errPartial):
			// An incomplete line is being written: it is read whole
			// next time.
			return nil
		case err != nil && !errors.As(err, &long):
			return fmt.Errorf("audit log: %w", err)
		}
		t.n++
		t.last = append(t.last[:0], b...)
		if err := fn(line{raw: b, err: err, file: t.path, n: t.n}); err != nil {
			return err
		}
	}
}

func (t *tailer) emit(l line) error { return t.fn(l.record()) }

// poll hands on what was appended, following rotations: the rest of the
// file it had, the files rotated after it, then the active one.
func (t *tailer) poll() error {
	if t.f == nil {
		if err := t.open(); err != nil || t.f == nil {
			return err
		}
	}
	if err := t.each(t.emit); err != nil {
		return err
	}
	fi, err := t.f.Stat()
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	if st, err := os.Stat(t.path); err != nil || os.SameFile(st, fi) {
		return nil
	}
	t.f.Close()
	t.f = nil
	if err := t.open(); err != nil || t.f == nil {
		return err
	}
	files, err := listFiles(t.path)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	for _, lf := range files[:len(files)-1] {
		if lf.first <= t.seq {
			continue
		}
		r := &tailer{path: lf.path, fn: t.fn}
		if err := r.open(); err != nil || r.f == nil {
			return err
		}
		if same(r.f, t.f) {
			r.close()
			break
		}
		err := r.each(r.emit)
		r.close()
		if err != nil {
			return err
		}
		t.seq = r.seq
	}
	return t.each(t.emit)
}

func same(a, b *os.File) bool {
	ai, err1 := a.Stat()
	bi, err2 := b.Stat()
	return err1 == nil && err2 == nil && os.SameFile(ai, bi)
}

// readLast returns the last keep lines of the rotated file at path, unless
// it is the active file, which was read already.
func readLast(path string, keep int, active *os.File) ([]line, error) {
	t := &tailer{path: path}
	if err := t.open(); err != nil || t.f == nil {
		return nil, err
	}
	defer t.close()
	if active != nil && same(t.f, active) {
		return nil, nil
	}
	var out []line
	err := t.each(keepLast(&out, keep))
	return out, err
}
