package output

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// Paging and search bounds.
const (
	// DefaultReadLimit is the page size when read_output gives no limit.
	DefaultReadLimit = 16 << 10
	// MaxReadLimit caps one page before the result budget trims it further.
	MaxReadLimit = 1 << 20
	// DefaultMaxMatches and MaxMatches bound search_output matches.
	DefaultMaxMatches = 20
	MaxMatches        = 200
	// MaxPatternBytes bounds a search pattern.
	MaxPatternBytes = 4096
	// SearchTimeLimit bounds the time one search, or one look for a line
	// of read_output, scans.
	SearchTimeLimit = 5 * time.Second
	// MaxReadLines caps the lines of one page read by line; the page's
	// byte limit usually ends it first.
	MaxReadLines = 10000
)

// Page is the read_output result: the bytes [Offset, Offset+n) of a stream,
// where n is the raw length of Data.
type Page struct {
	Handle string `json:"handle"`
	Stream string `json:"stream"`
	// Offset is where Data starts in the whole stream. Bytes between the
	// requested offset and Offset are named in Missing.
	Offset int64 `json:"offset"`
	// Line is the number, from 1, of the line Data starts; 0 when the page
	// was read by offset and the number is not known.
	Line int64  `json:"line,omitempty"`
	Data string `json:"data"`
	// Encoding is "base64" when the range is not valid UTF-8 text;
	// empty means Data is the text itself.
	Encoding string `json:"encoding,omitempty"`
	// NextOffset is where the next page starts. Every byte between the
	// requested offset and NextOffset is either in Data or in Missing.
	NextOffset int64 `json:"next_offset"`
	// EOF reports that no byte follows NextOffset: the end of a finished
	// stream.
	EOF bool `json:"eof"`
	// Running reports that the action was still running: TotalBytes is
	// what had arrived, and more may follow.
	Running    bool  `json:"running,omitempty"`
	TotalBytes int64 `json:"total_bytes"`
	// Missing names byte ranges that were not retained, with the retained
	// bytes of a character that a gap cuts in two.
	Missing []ByteRange `json:"missing,omitempty"`
	// Interrupted reports that the process that ran the action ended
	// before it finished: TotalBytes is what was found on disk, and the
	// stream may have been longer.
	Interrupted bool `json:"interrupted,omitempty"`

	raw []byte // the bytes of Data before encoding, for trimming
}

// ReadLines returns the page that starts at line (from 1) of a finished
// action's stream and holds at most lines lines (<= 0 or more than
// MaxReadLines means MaxReadLines), within limit and maxBytes as for Read.
// The line is found by counting newlines in the retained bytes, for at
// most SearchTimeLimit: from the stream's start, or back from its end for
// the retained end of the stream. A line past the end, or one that starts
// in bytes not kept on disk, is a *LineError. Other errors are Read's.
func (s *Spool) ReadLines(ctx context.Context, handle, stream string, line int64, lines, limit, maxBytes int) (*Page, error) {
	rd, err := s.open(ctx, handle, stream)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	if line < 1 {
		return nil, &LineError{Line: line, Reason: "lines are numbered from 1"}
	}
	if lines <= 0 || lines > MaxReadLines {
		lines = MaxReadLines
	}
	find, cancel := context.WithTimeoutCause(ctx, s.searchLimit, errSearchTime)
	defer cancel()
	start, err := lineOffset(find, rd, line)
	if err != nil {
		return nil, err
	}
	p, err := readPage(rd, start, limit, maxBytes)
	if err != nil {
		return nil, err
	}
	p.Line = line
	if i := nthIndex(p.raw, '\n', lines); i >= 0 && p.Encoding == "" {
		p.cut(p.raw[:i+1])
	}
	return p, nil
}

// LineError is a line that read_output cannot find: past the end of the
// stream, or starting in bytes that were not kept on disk.
type LineError struct {
	Line   int64
	Reason string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// lineOffset returns where line n starts in the retained bytes of rd. The
// first line of a retained range is known when the range starts the
// stream, or when it ends the stream and the stream's newlines were
// counted (not for an interrupted action).
func lineOffset(ctx context.Context, rd *streamReader, n int64) (int64, error) {
	m := rd.meta
	retained, _ := rd.meta.retained()
	pastEnd := &LineError{Line: n, Reason: fmt.Sprintf("past the end: %s has %s", m.Name, Plural(streamLines(rd, retained), "line"))}
	if rd.interrupted {
		pastEnd.Reason = fmt.Sprintf("past the end of what was recovered of %s", m.Name)
	} else if n > streamLines(rd, retained) {
		return 0, pastEnd
	}
	gapErr := func(g ByteRange) error {
		return &LineError{Line: n, Reason: fmt.Sprintf("it starts in bytes that were not kept on disk (offsets %d to %d), where line numbers are unknown; read by offset instead (read_output with \"offset\")", g.Start, g.End-1)}
	}
	prevEnd := int64(0)
	for _, r := range retained {
		var first int64 // the number of the line that holds r.Start
		switch {
		case r.Start == 0:
			first = 1
		case r.End == m.Total && !rd.interrupted:
			k, _, err := nthNewline(ctx, rd, r, -1)
			if err != nil {
				return 0, err
			}
			first = m.Newlines - k + 1
		default:
			return 0, gapErr(ByteRange{prevEnd, r.Start})
		}
		if n == 1 && r.Start == 0 {
			return 0, nil
		}
		if n <= first {
			// r.Start may be inside line first: its start is in the gap.
			return 0, gapErr(ByteRange{prevEnd, r.Start})
		}
		_, at, err := nthNewline(ctx, rd, r, n-first)
		if err != nil {
			return 0, err
		}
		if at >= 0 {
			switch {
			case at+1 < r.End:
				return at + 1, nil
			case r.End < m.Total:
				return 0, gapErr(ByteRange{r.End, nextStart(retained, r.End, m.Total)})
			}
			return 0, pastEnd
		}
		prevEnd = r.End
	}
	if prevEnd < m.Total {
		return 0, gapErr(ByteRange{prevEnd, nextStart(retained, prevEnd, m.Total)})
	}
	return 0, pastEnd
}

// streamLines counts the lines of a finished stream: its newlines, plus
// one for a last line without a newline (assumed when its last byte was
// not kept).
func streamLines(rd *streamReader, retained []ByteRange) int64 {
	m := rd.meta
	if m.Total == 0 {
		return 0
	}
	if k := len(retained); k > 0 && retained[k-1].End == m.Total {
		b := []byte{0}
		if rd.readAt(b, m.Total-1) == nil && b[0] == '\n' {
			return m.Newlines
		}
	}
	return m.Newlines + 1
}

// nextStart is where the retained range after off starts, or total.
func nextStart(retained []ByteRange, off, total int64) int64 {
	for _, q := range retained {
		if q.Start >= off {
			return q.Start
		}
	}
	return total
}

// nthNewline scans r for its k-th newline and returns how many newlines
// it counted and the k-th's offset, or -1; k < 0 counts them all. It
// stops with ctx's cause when ctx ends.
func nthNewline(ctx context.Context, rd *streamReader, r ByteRange, k int64) (count, at int64, err error) {
	buf := make([]byte, min(searchBufBytes, r.End-r.Start))
	for off := r.Start; off < r.End; {
		if ctx.Err() != nil {
			if context.Cause(ctx) == errSearchTime {
				return 0, -1, fmt.Errorf("counting lines took longer than %v; read by offset instead", SearchTimeLimit)
			}
			return 0, -1, context.Cause(ctx)
		}
		b := buf[:min(int64(len(buf)), r.End-off)]
		if err := rd.readAt(b, off); err != nil {
			return 0, -1, err
		}
		if k < 0 {
			count += int64(bytes.Count(b, []byte{'\n'}))
		} else if i := nthIndex(b, '\n', int(min(k-count, math.MaxInt32))); i >= 0 {
			return k, off + int64(i), nil
		} else {
			count += int64(bytes.Count(b, []byte{'\n'}))
		}
		off += int64(len(b))
	}
	return count, -1, nil
}

// nthIndex returns the index of the n-th c in b (n >= 1), or -1.
func nthIndex(b []byte, c byte, n int) int {
	at := 0
	for ; n > 0; n-- {
		i := bytes.IndexByte(b[at:], c)
		if i < 0 {
			return -1
		}
		at += i + 1
	}
	return at - 1
}

// Read returns a page of a finished action's stream. A negative offset, or
// fromEnd, counts back from the end of the stream; fromEnd with offset 0
// reads the last limit bytes. limit <= 0 means DefaultReadLimit; it is
// capped at MaxReadLimit and at maxBytes, the most bytes the caller can
// return (its result budget: no page can carry more bytes than the result
// that holds it); maxBytes <= 0 adds no cap.
//
// Read waits for a turn (see SpoolOptions.MaxConcurrentReads) and returns
// ctx's cause, wrapped, if ctx ends first. An unknown, expired or malformed
// handle, or an unknown stream, is a *HandleError.
func (s *Spool) Read(ctx context.Context, handle, stream string, offset int64, fromEnd bool, limit, maxBytes int) (*Page, error) {
	rd, err := s.open(ctx, handle, stream)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	start := offset
	total := rd.meta.Total
	switch {
	case fromEnd && offset == 0:
		// The end itself would be an empty page: give the last limit bytes.
		start = total - int64(pageLimit(limit, maxBytes))
	case fromEnd || offset < 0:
		start = total - abs64(offset)
	}
	return readPage(rd, min(max(start, 0), total), limit, maxBytes)
}

// pageLimit is the most bytes of a page: see Read.
func pageLimit(limit, maxBytes int) int {
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	if maxBytes > 0 {
		limit = min(limit, maxBytes)
	}
	return limit
}

// readPage reads the page at start, which is within the stream. A page
// cut by its limit ends after a newline unless its first line is longer.
func readPage(rd *streamReader, start int64, limit, maxBytes int) (*Page, error) {
	limit = pageLimit(limit, maxBytes)
	total := rd.meta.Total
	p := &Page{Handle: rd.handle, Stream: rd.meta.Name, Offset: start, NextOffset: start, TotalBytes: total,
		Running: rd.running, Interrupted: rd.interrupted}
	retained, _ := rd.meta.retained()
	// Find the retained range at or after start.
	var r *ByteRange
	for i := range retained {
		if retained[i].End > start {
			r = &retained[i]
			break
		}
	}
	if r == nil {
		if start < total {
			p.Missing = []ByteRange{{start, total}}
		}
		p.NextOffset, p.EOF = total, !p.Running
		return p, nil
	}
	if r.Start > start {
		p.Missing = append(p.Missing, ByteRange{start, r.Start})
		start = r.Start
	}
	end := min(r.End, start+int64(limit))
	buf := make([]byte, end-start)
	if err := rd.readAt(buf, start); err != nil {
		return nil, err
	}
	// Keep whole characters when the bytes are text: begin at the character
	// that start falls in, and leave a character cut by the limit for the
	// next page. A character cut by a gap cannot be shown, so its retained
	// bytes are named missing with the gap.
	gapBefore := start == r.Start && r.Start > 0
	gapAfter := end == r.End && r.End < total
	tStart, t := start, buf
	if gapBefore {
		t = trimToRuneStart(t)
		tStart += int64(len(buf) - len(t))
	} else if back := runeStartBack(rd, buf, start, r.Start); len(back) > 0 {
		tStart -= int64(len(back))
		t = append(back, t...)
	}
	switch {
	case end < r.End:
		t, _ = lineEnd(t)
	case gapAfter, rd.running && end == total:
		// Also the live edge of a running stream: a character whose last
		// bytes have not arrived yet is left for the next page.
		t = trimToRuneEnd(t)
	}
	if len(t) == 0 && end < r.End {
		// A limit smaller than one character: give it whole anyway.
		t = make([]byte, min(r.End-tStart, utf8.UTFMax))
		if err := rd.readAt(t, tStart); err != nil {
			return nil, err
		}
		t = trimToRuneEnd(t)
	}
	if isText(t) {
		if tStart > start {
			if n := len(p.Missing); n > 0 && p.Missing[n-1].End == start {
				p.Missing[n-1].End = tStart
			} else {
				p.Missing = append(p.Missing, ByteRange{start, tStart})
			}
		}
		start, buf = tStart, t
	}
	p.Offset = start
	p.setData(buf)
	p.NextOffset = start + int64(len(buf))
	if gapAfter {
		// Report the gap after this range now, so that no page skips it.
		next := total
		for _, q := range retained {
			if q.Start >= r.End {
				next = q.Start
				break
			}
		}
		p.Missing = append(p.Missing, ByteRange{p.NextOffset, next})
		p.NextOffset = next
	}
	p.EOF = p.NextOffset >= total && !p.Running
	return p, nil
}

// runeStartBack returns the up to 3 retained bytes before start that begin
// the character start falls in, or nil.
func runeStartBack(rd *streamReader, buf []byte, start, rangeStart int64) []byte {
	if len(buf) == 0 || utf8.RuneStart(buf[0]) {
		return nil
	}
	n := min(start-rangeStart, utf8.UTFMax-1)
	if n <= 0 {
		return nil
	}
	back := make([]byte, n)
	if rd.readAt(back, start-n) != nil {
		return nil
	}
	for i := len(back) - 1; i >= 0; i-- {
		if utf8.RuneStart(back[i]) {
			return back[i:]
		}
	}
	return nil
}

// cut shortens the page to b, a start of its data, leaving the rest for
// the next page.
func (p *Page) cut(b []byte) {
	p.setData(b)
	// A gap after the data is reported by the next page.
	var before []ByteRange
	for _, m := range p.Missing {
		if m.End <= p.Offset {
			before = append(before, m)
		}
	}
	p.Missing = before
	p.NextOffset = p.Offset + int64(len(b))
	p.EOF = p.NextOffset >= p.TotalBytes && !p.Running
}

func (p *Page) setData(b []byte) {
	p.raw = b
	if isText(b) {
		p.Data, p.Encoding = string(b), ""
		return
	}
	p.Data, p.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
