package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
)

// readBufSize is the size of one read from the underlying stream.
const readBufSize = 64 << 10

// keepFrameCap is the largest the frame buffer grows, and is kept between
// frames. The rest of a longer line goes to chunks, which are lent from
// chunkPool and given back once the line is copied out whole: the line
// is then allocated once at its size, not grown by doubling (which for
// an upload's 7 MB of inline content allocated 16 MB and copied it twice
// more, and the collector ran for all of it).
const keepFrameCap = 256 << 10

// chunkSize is the size of one chunk of a long line.
const chunkSize = 1 << 20

// chunkPool holds the chunks of long lines between them.
var chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}

// keepEnds is how many bytes of each end of an oversize line are kept, to
// find its request id: JSON-RPC writers put the id near the start
// (Go, Python) or last (TypeScript).
const keepEnds = 1 << 10

// OversizeError reports a line longer than the limit. The line was discarded
// up to and including its newline; the stream can still be read.
type OversizeError struct {
	Size  int64 // bytes in the discarded line, without its newline
	Limit int   // the limit in force
	// Head and Tail are the line's first bytes (up to 1 KiB, and no more
	// than Limit) and its last (up to 1 KiB, with a '\r' before the
	// newline), where its request id may be read.
	Head, Tail []byte
}

func (e *OversizeError) Error() string {
	return fmt.Sprintf("frame of %d bytes exceeds the limit of %d bytes", e.Size, e.Limit)
}

// ID returns the JSON text of the discarded line's request id, when its
// kept ends show one: the last member of an object that ends the line
// (TailID), else the last id its head gives (RequestID); nil otherwise.
func (e *OversizeError) ID() json.RawMessage {
	if id := TailID(e.Tail); id != nil {
		return id
	}
	id, _ := RequestID(e.Head)
	return id
}

// A Reader reads newline-delimited frames from a stream. It never holds more
// than its limit of one frame (and, while a line in chunks is copied out
// whole, its chunks beside the copy): a longer line is counted while it is
// skipped and reported as an *OversizeError, with no more than 1 KiB of
// each of its ends kept.
type Reader struct {
	r       io.Reader
	limit   int
	metrics *Metrics

	buf        []byte // read buffer; buf[head:tail] is not yet consumed
	head, tail int
	err        error    // sticky error from r, returned once buf is consumed
	frame      []byte   // the part of the current line seen in earlier reads (its first spillAt bytes); its head once skipping
	spillAt    int      // how long frame grows before the line goes on in chunks
	chunks     [][]byte // the rest of the current line, each from chunkPool
	chunked    int      // bytes in chunks
	skipping   bool     // the current line is over the limit and being discarded
	skipped    int64    // bytes of the current line discarded so far
	last       []byte   // the last bytes of the line being discarded (keepEnds, at most twice that)
	owned      bool     // the frame Next returned last is the caller's (see Owned)
}

// NewReader returns a Reader of frames of at most limit bytes from r.
// The limit counts every byte of a line except its '\n' (a '\r' before it
// counts). metrics, if not nil, receives byte and frame counts.
func NewReader(r io.Reader, limit int, metrics *Metrics) *Reader {
	return newReaderSize(r, limit, metrics, readBufSize)
}

func newReaderSize(r io.Reader, limit int, metrics *Metrics, bufSize int) *Reader {
	if limit < 1 {
		panic("wire: frame limit must be positive")
	}
	return &Reader{r: r, limit: limit, metrics: metrics, buf: make([]byte, bufSize), spillAt: keepFrameCap}
}

// Next returns the next frame without its line ending ("\n" or "\r\n").
// Lines holding only spaces, tabs or '\r' are skipped. The frame is valid
// until the next call, unless Owned says it is the caller's. A line over the limit yields an *OversizeError once
// its newline (or the end of the stream) is reached, and the caller may call
// Next again. A last line without a newline is returned as a frame; after
// it, Next returns io.EOF or the error from the underlying reader.
func (fr *Reader) Next() ([]byte, error) {
	fr.frame, fr.owned = fr.frame[:0], false
	for {
		if fr.head < fr.tail {
			chunk := fr.buf[fr.head:fr.tail]
			if i := bytes.IndexByte(chunk, '\n'); i >= 0 {
				fr.head += i + 1
				line, err := fr.endLine(chunk[:i])
				if err != nil {
					return nil, err
				}
				if line == nil {
					continue // blank line
				}
				return line, nil
			}
			fr.head = fr.tail
			fr.addPartial(chunk)
		}
		if fr.err != nil {
			return fr.endStream()
		}
		n, err := fr.r.Read(fr.buf)
		if n < 0 || n > len(fr.buf) {
			n = 0 // a broken reader; treat as no data rather than panic
		}
		fr.head, fr.tail = 0, n
		fr.err = err
		if fr.metrics != nil {
			fr.metrics.StdinBytes.Add(int64(n))
		}
	}
}

// addPartial takes the part of a line seen so far, or counts it as skipped
// once the line is known to be over the limit.
func (fr *Reader) addPartial(p []byte) {
	if fr.skipping {
		fr.skipped += int64(len(p))
		fr.keepLast(p)
		return
	}
	need := len(fr.frame) + fr.chunked + len(p)
	if need > fr.limit {
		fr.skipping = true
		fr.skipped = int64(need)
		fr.keepLast(fr.frame[max(0, len(fr.frame)-keepEnds):])
		for _, c := range fr.chunks {
			fr.keepLast(c)
		}
		fr.keepLast(p)
		// The frame buffer keeps the line's head: what it has of it, and
		// from the chunks and p what it has room for.
		head := min(keepEnds, fr.limit)
		if len(fr.frame) < head && cap(fr.frame) < head {
			fr.frame = append(make([]byte, 0, head), fr.frame...)
		}
		for _, more := range append(fr.chunks, p) {
			fr.frame = append(fr.frame, more[:min(len(more), max(0, head-len(fr.frame)))]...)
		}
		fr.releaseChunks()
		fr.frame = fr.frame[:min(len(fr.frame), head)]
		return
	}
	if fr.chunked > 0 || need > max(fr.spillAt, cap(fr.frame)) {
		fr.spill(p)
		return
	}
	if need > cap(fr.frame) {
		// Grow by doubling but never past the limit, so the buffer itself
		// stays within the promise.
		c := min(max(2*cap(fr.frame), need, 512), fr.limit, fr.spillAt)
		nf := make([]byte, len(fr.frame), c)
		copy(nf, fr.frame)
		fr.frame = nf
	}
	fr.frame = append(fr.frame, p...)
}

// spill adds p to the chunks of the current line.
func (fr *Reader) spill(p []byte) {
	fr.chunked += len(p)
	for len(p) > 0 {
		if len(fr.chunks) == 0 || len(fr.chunks[len(fr.chunks)-1]) == chunkSize {
			fr.chunks = append(fr.chunks, chunkPool.Get().(*[chunkSize]byte)[:0])
		}
		last := &fr.chunks[len(fr.chunks)-1]
		n := copy((*last)[len(*last):chunkSize], p)
		*last, p = (*last)[:len(*last)+n], p[n:]
	}
}

// releaseChunks gives the chunks back to chunkPool.
func (fr *Reader) releaseChunks() {
	for i, c := range fr.chunks {
		chunkPool.Put((*[chunkSize]byte)(c[:chunkSize]))
		fr.chunks[i] = nil
	}
	fr.chunks, fr.chunked = fr.chunks[:0], 0
}

// keepLast keeps the last keepEnds bytes seen of the line being discarded,
// p being the latest.
func (fr *Reader) keepLast(p []byte) {
	if len(p) >= keepEnds {
		fr.last = append(fr.last[:0], p[len(p)-keepEnds:]...)
		return
	}
	if len(fr.last)+len(p) > 2*keepEnds {
		fr.last = fr.last[:copy(fr.last, fr.last[len(fr.last)-keepEnds:])]
	}
	fr.last = append(fr.last, p...)
}

// endLine finishes the current line, whose last piece (before '\n') is tail.
// It returns nil, nil for a blank line.
func (fr *Reader) endLine(tail []byte) ([]byte, error) {
	if !fr.skipping && len(fr.frame)+fr.chunked+len(tail) > fr.limit {
		fr.addPartial(tail) // now skipping
		tail = nil
	}
	if fr.skipping {
		fr.addPartial(tail)
		oe := &OversizeError{Size: fr.skipped, Limit: fr.limit,
			Head: bytes.Clone(fr.frame), Tail: bytes.Clone(fr.last[max(0, len(fr.last)-keepEnds):])}
		fr.skipping, fr.skipped = false, 0
		fr.frame, fr.last = fr.frame[:0], fr.last[:0]
		if fr.metrics != nil {
			fr.metrics.OversizeFrames.Add(1)
		}
		return nil, oe
	}
	line := tail
	if len(fr.frame) > 0 || fr.chunked > 0 {
		fr.addPartial(tail)
		line = fr.frame
	}
	joined := fr.chunked > 0
	if joined {
		line = make([]byte, 0, len(fr.frame)+fr.chunked)
		line = append(line, fr.frame...)
		for _, c := range fr.chunks {
			line = append(line, c...)
		}
		fr.releaseChunks()
	}
	size := len(line)
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if isBlank(line) {
		fr.frame = fr.frame[:0]
		return nil, nil
	}
	if fr.metrics != nil {
		fr.metrics.noteFrameIn(int64(size))
	}
	fr.owned = joined
	return line, nil
}

// Owned reports whether the frame Next returned last is the caller's for
// good: a line longer than the frame buffer, copied out of its chunks
// into memory of its own, which no later call reads into. A caller may
// then keep it, or a string made over it without a copy, as long as it
// never writes to it.
func (fr *Reader) Owned() bool { return fr.owned }

// endStream handles the end of the underlying stream: a pending line is
// delivered (or reported as oversize) before the error.
func (fr *Reader) endStream() ([]byte, error) {
	if fr.skipping || len(fr.frame) > 0 || fr.chunked > 0 {
		line, err := fr.endLine(nil)
		if err != nil || line != nil {
			return line, err
		}
	}
	return nil, fr.err
}

func isBlank(p []byte) bool {
	for _, b := range p {
		if b != ' ' && b != '\t' && b != '\r' {
			return false
		}
	}
	return true
}
