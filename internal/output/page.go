package output

import (
	"context"
	"encoding/base64"
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
	// SearchTimeLimit bounds the time one search scans.
	SearchTimeLimit = 5 * time.Second
)

// Page is the read_output result: the bytes [Offset, Offset+n) of a stream,
// where n is the raw length of Data.
type Page struct {
	Handle string `json:"handle"`
	Stream string `json:"stream"`
	// Offset is where Data starts in the whole stream. Bytes between the
	// requested offset and Offset are named in Missing.
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
	// Encoding is "base64" when the range is not valid UTF-8 text;
	// empty means Data is the text itself.
	Encoding string `json:"encoding,omitempty"`
	// NextOffset is where the next page starts. Every byte between the
	// requested offset and NextOffset is either in Data or in Missing.
	NextOffset int64 `json:"next_offset"`
	EOF        bool  `json:"eof"`
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
	st := rd.st
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	limit = min(limit, MaxReadLimit)
	if maxBytes > 0 {
		limit = min(limit, maxBytes)
	}
	total := st.meta.Total
	start := offset
	switch {
	case fromEnd && offset == 0:
		// The end itself would be an empty page: give the last limit bytes.
		start = total - int64(limit)
	case fromEnd || offset < 0:
		start = total - abs64(offset)
	}
	start = min(max(start, 0), total)
	p := &Page{Handle: rd.handle, Stream: stream, Offset: start, NextOffset: start, TotalBytes: total, Interrupted: rd.interrupted}
	retained, _ := st.retained()
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
		p.NextOffset, p.EOF = total, true
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
	if end < r.End || gapAfter {
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
	p.EOF = p.NextOffset >= total
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
