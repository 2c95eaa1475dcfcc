package output

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/actiongw/actiongw/internal/redact"
)

// Limits bounds the memory one captured stream keeps for previews.
type Limits struct {
	// HeadBytes is how many of the first bytes are kept; zero keeps none.
	HeadBytes int
	// TailBytes is how many of the last bytes are kept, in a ring; zero
	// keeps none.
	TailBytes int
}

// Stream is the STREAM object of a tool result: what one stream
// carried and a preview of it. Every count is of the redacted stream.
type Stream struct {
	// Bytes counts every byte received, after redaction, kept or not.
	Bytes int64 `json:"bytes"`
	// Lines counts newlines, plus one for a final line without a newline.
	Lines int64 `json:"lines"`
	// Head is the start of the stream and Tail its end, valid UTF-8; they
	// never overlap. Head ends after a newline and Tail begins after one,
	// unless a line is longer than the preview: then it is cut at a
	// character. Both are empty for a binary stream.
	Head string `json:"head"`
	Tail string `json:"tail"`
	// Truncated reports that Head and Tail together do not hold the
	// whole stream.
	Truncated bool `json:"truncated"`
	// SHA256 is the hex digest of the whole redacted stream; empty while
	// the action runs.
	SHA256 string `json:"sha256,omitempty"`
	// Binary reports that the stream does not look like text: it has a NUL
	// byte or invalid UTF-8 in the kept head or tail.
	Binary bool `json:"binary,omitempty"`
	// SpoolError says why some of the stream could not be kept on disk
	// for read_output; counts and hash are complete all the same.
	SpoolError string `json:"spool_error,omitempty"`

	// tailMidLine reports that Tail begins inside a line, which a line
	// longer than the tail preview does.
	tailMidLine bool

	// Retained lists the byte ranges kept on disk, in order; nil when the
	// stream was not spooled.
	Retained []ByteRange `json:"-"`
}

// ByteRange is the half-open range [Start, End) of stream offsets.
type ByteRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// Capture is the io.Writer a producer copies one stream into. Write never
// blocks on anything but memory and the local disk, and never fails, so the
// producer is always drained to the end. Every byte is redacted first; then
// it is counted, hashed, previewed and spooled.
//
// A Capture is written by one goroutine. Summary is meant for after Finish
// (or flush) of the action.
type Capture struct {
	red      *redact.Stream
	bytes    int64
	newlines int64
	last     byte
	hash     hasher
	// head and tail grow as bytes arrive, to headCap and tailCap: most
	// streams are empty or short, and a finished action's captures live
	// as long as its result is kept.
	head     []byte
	tail     []byte // a ring of the last bytes once full
	tailNext int    // where the ring writes next
	headCap  int
	tailCap  int
	spool    sink // nil: nothing is kept on disk
	flushed  bool
	tap      func(offset int64, p []byte)
}

// sink is where a Capture keeps redacted bytes beyond its previews: a
// stream of the spool.
type sink interface {
	// write keeps p, which holds newlines newline bytes.
	write(p []byte, newlines int64)
	// retained returns the ranges kept and why some were not, if any.
	retained() ([]ByteRange, string)
	// complete records that the stream ended normally: it holds all the
	// producer gave.
	complete()
}

func tailRing(tailBytes int) int {
	if tailBytes <= 0 {
		return 0
	}
	return tailBytes + 1
}

func newCapture(red *redact.Redactor, lim Limits, spool sink) *Capture {
	c := &Capture{
		hash:    hasher{h: sha256.New()},
		headCap: max(0, lim.HeadBytes),
		// The ring keeps one byte more than the tail preview: the byte
		// before the tail says whether the tail begins a line.
		tailCap: tailRing(lim.TailBytes),
		spool:   spool,
	}
	c.red = red.NewStream(c.keep)
	return c
}

// Write redacts p and keeps what the limits allow. It always returns
// len(p), nil.
func (c *Capture) Write(p []byte) (int, error) {
	return c.red.Write(p)
}

// Cut ends a stream that stopped early, before Finish: held-back bytes
// that could begin a secret are replaced rather than released.
func (c *Capture) Cut() {
	if c.flushed {
		return
	}
	c.flushed = true
	c.red.Cut()
	c.hash.finish()
}

// Flush ends the stream: it releases the bytes the redactor held back.
// Action.Finish does it too; a caller that reads Snapshot from another
// goroutine flushes first, under the lock it reads with.
func (c *Capture) Flush() { c.flush() }

// flush ends the stream: it releases the bytes the redactor held back.
func (c *Capture) flush() {
	if c.flushed {
		return
	}
	c.flushed = true
	c.red.Close()
	c.hash.finish()
	if c.spool != nil {
		c.spool.complete()
	}
}

// keep takes redacted bytes.
func (c *Capture) keep(p []byte) {
	if len(p) == 0 {
		return
	}
	c.bytes += int64(len(p))
	newlines := int64(bytes.Count(p, []byte{'\n'}))
	c.newlines += newlines
	c.last = p[len(p)-1]
	c.hash.write(p)
	if room := c.headCap - len(c.head); room > 0 {
		c.head = appendCapped(c.head, p[:min(room, len(p))], c.headCap)
	}
	if n := c.tailCap; n > 0 {
		q := p[max(0, len(p)-n):]
		for len(q) > 0 {
			if len(c.tail) < n {
				k := min(n-len(c.tail), len(q))
				c.tail = appendCapped(c.tail, q[:k], n)
				q = q[k:]
				continue
			}
			k := copy(c.tail[c.tailNext:], q)
			c.tailNext = (c.tailNext + k) % n
			q = q[k:]
		}
	}
	if c.spool != nil {
		c.spool.write(p, newlines)
	}
	if c.tap != nil {
		c.tap(c.bytes-int64(len(p)), p)
	}
}

// appendCapped appends p to b, where len(b)+len(p) <= limit: b grows by
// doubling from a small start, never past limit.
func appendCapped(b, p []byte, limit int) []byte {
	if n := len(b) + len(p); n > cap(b) {
		grown := make([]byte, len(b), min(limit, max(n, 2*cap(b), 256)))
		copy(grown, b)
		b = grown
	}
	return append(b, p...)
}

// Tap has f called with every piece of redacted output as it is kept
// (the bytes a reader of the stream gets, at their offset in it), on the
// writer's goroutine: f must not block nor keep p. Set it before the
// first Write.
func (c *Capture) Tap(f func(offset int64, p []byte)) { c.tap = f }

// Summary returns the STREAM object. It ends the stream, as the action's
// Finish does, if that has not happened yet.
//
// The previews break at lines: the head ends after its last newline and
// the tail starts after a newline, unless a single line is longer than
// the preview (then it is cut at a character). A stream that fits in both
// previews together is shown whole, split at a line between them.
func (c *Capture) Summary() Stream {
	c.flush()
	s := c.summary(true)
	s.SHA256 = hex.EncodeToString(c.hash.h.Sum(nil))
	return s
}

// Matched returns the names of the secrets a whole form of which the
// redactor replaced in this stream so far, sorted (see redact.Stream).
func (c *Capture) Matched() []string { return c.red.Matched() }

// Snapshot returns the STREAM object of the stream so far, without its
// SHA256 (known only at the end) and without ending it: what a running
// action has produced. Bytes the redactor still holds back, because they
// could begin a secret, are not in it yet. It must not run at the same
// time as Write.
func (c *Capture) Snapshot() Stream { return c.summary(false) }

// Recent returns a copy of the last bytes kept so far, at most n and at
// most the tail preview's, and the offset of the first in the redacted
// stream: what a reader who comes late sees first. It must not run at the
// same time as Write.
func (c *Capture) Recent(n int) (offset int64, p []byte) {
	n = int(min(int64(n), int64(len(c.tail)), c.bytes))
	p = make([]byte, 0, n)
	if n <= 0 {
		return c.bytes, p
	}
	// The ring's bytes in order, oldest first: from tailNext once full.
	ring := c.tail
	start := 0
	if len(ring) == cap(ring) {
		start = c.tailNext
	}
	from := (start + len(ring) - n) % len(ring)
	if from+n <= len(ring) {
		p = append(p, ring[from:from+n]...)
	} else {
		p = append(append(p, ring[from:]...), ring[:n-(len(ring)-from)]...)
	}
	return c.bytes - int64(n), p
}

// summary builds the STREAM object, less the SHA256. Before the end
// (final false), a character whose last bytes have not arrived yet is left
// out of the previews rather than making the stream look binary.
func (c *Capture) summary(final bool) Stream {
	s := Stream{Bytes: c.bytes, Lines: c.newlines}
	if c.bytes > 0 && c.last != '\n' {
		s.Lines++
	}
	headMax, tailMax := c.headCap, max(0, c.tailCap-1)
	ring := append(c.tail[c.tailNext:len(c.tail):len(c.tail)], c.tail[:c.tailNext]...)
	// What the ring holds after the head: they never overlap.
	rest := ring[len(ring)-int(min(int64(len(ring)), c.bytes-int64(len(c.head)))):]
	var head, tail []byte
	if c.bytes <= int64(headMax+tailMax) {
		// The whole stream is in memory: split it at a line.
		full := append(c.head[:len(c.head):len(c.head)], rest...)
		if !final {
			full = trimToRuneEnd(full)
		}
		if !isText(full) {
			s.Binary = true
		} else if len(full) <= headMax {
			head = full
		} else {
			var cut bool
			head, cut = lineEnd(full[:headMax])
			tail = full[len(head):]
			s.tailMidLine = cut && len(head) > 0
		}
	} else {
		// Cut in the middle; the ring's extra first byte says whether the
		// tail begins a line.
		head = trimToRuneEnd(c.head)
		var window []byte
		if len(rest) > 0 {
			window = trimToRuneStart(rest[1:])
		}
		if !final {
			window = trimToRuneEnd(window)
		}
		if !isText(head) || !isText(window) {
			s.Binary = true
			head = nil
		} else {
			head, _ = lineEnd(head)
			if len(window) > 0 {
				tail, s.tailMidLine = lineStart(window, len(window) == len(rest)-1 && rest[0] == '\n')
			}
		}
	}
	s.Head, s.Tail = string(head), string(tail)
	s.Truncated = int64(len(s.Head)+len(s.Tail)) < c.bytes
	if c.spool != nil {
		s.Retained, s.SpoolError = c.spool.retained()
	}
	return s
}

// Hashing a large stream runs on its own goroutine, overlapping the
// redaction on a second core: SHA-256 alone costs about as much as all the
// rest of a capture. Each handoff can wake a sleeping thread, so the
// buffers are large: 256 KiB buffers instead of 64 KiB took the capture
// from 1.17 to 1.63 GB/s (BenchmarkCapture, 100 secrets) and an ssh_exec
// drain's CPU down by about 12 %, for 1 MiB per stream past
// asyncHashAfter.
const (
	asyncHashAfter = 1 << 20 // bytes hashed inline first: small streams start no goroutine
	hashBufSize    = 256 << 10
	hashBuffers    = 4
)

// hasher computes the SHA-256 of a stream. Once the stream passes
// asyncHashAfter, an AsyncWriter hashes it on a goroutine. finish stops
// the goroutine and waits for it.
type hasher struct {
	h       hash.Hash
	inline  int64
	async   *AsyncWriter
	stopped bool
}

func (h *hasher) write(p []byte) {
	if h.async == nil {
		if h.inline < asyncHashAfter || h.stopped {
			h.h.Write(p)
			h.inline += int64(len(p))
			return
		}
		h.async = NewAsyncWriter(h.h, hashBuffers, hashBufSize)
	}
	h.async.Write(p)
}

// finish hashes what is buffered and stops the goroutine; h.h then holds
// the whole stream.
func (h *hasher) finish() {
	h.stopped = true
	if h.async != nil {
		h.async.Close()
		h.async = nil
	}
}
