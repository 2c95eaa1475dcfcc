package output

import (
	"fmt"
	"io"
)

// NotWholeError refuses to read a stream whole: the spool does not hold
// every byte of it, or the action did not give all of it.
type NotWholeError struct {
	Handle, Stream string
	Reason         string
}

func (e *NotWholeError) Error() string {
	return fmt.Sprintf("stream %s of action %s is not kept whole: %s", e.Stream, e.Handle, e.Reason)
}

// Whole reads a finished stream that the spool kept whole, from its first
// byte to its last. Close it when done.
type Whole struct {
	*io.SectionReader
	r *streamReader
}

// Close lets the stream's file go.
func (w *Whole) Close() { w.r.Close() }

// OpenWhole opens a stream of a finished action for reading all of it: the
// redacted bytes read_output gives, every one of them. It refuses (a
// *NotWholeError) a stream of an action still running, interrupted or
// stopped early (its stream may lack its end), and one of which the spool
// kept only the head and tail. It takes no read turn: it is for a
// transfer, which may take long, not for a page.
func (s *Spool) OpenWhole(handle, stream string) (*Whole, error) {
	if !handlePattern.MatchString(handle) {
		return nil, &HandleError{Handle: handle, Err: ErrMalformedHandle}
	}
	r, err := s.find(handle, stream)
	if err != nil {
		return nil, err
	}
	r.release = func() {}
	m := &r.meta
	rs, spoolErr := m.retained()
	why := ""
	switch {
	case r.running:
		why = "its action is still running; wait for its end (action_status with wait_s) and try again"
	case r.interrupted:
		why = "its action was interrupted: the server that ran it died"
	case !m.Complete:
		why = "its action stopped early (a timeout, a cancel or a limit), so the stream may lack its end"
	case spoolErr != "":
		why = "the spool could not keep it: " + spoolErr
	case m.Total > 0 && (len(rs) != 1 || rs[0] != ByteRange{0, m.Total}):
		why = fmt.Sprintf("the spool kept only the first and last bytes of its %d (retain_head_bytes and retain_tail_bytes bound what is kept)", m.Total)
	}
	if why != "" {
		r.Close()
		return nil, &NotWholeError{Handle: handle, Stream: stream, Reason: why}
	}
	return &Whole{SectionReader: io.NewSectionReader(readerAt{r}, 0, m.Total), r: r}, nil
}

// readerAt reads a finished stream's bytes at stream offsets.
type readerAt struct{ r *streamReader }

func (ra readerAt) ReadAt(p []byte, off int64) (int, error) {
	if err := ra.r.readAt(p, off); err != nil {
		return 0, err
	}
	return len(p), nil
}
