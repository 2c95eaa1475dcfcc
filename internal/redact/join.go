package redact

import "sync"

// The redactor matches patterns in a view of the input without the line
// breaks of wrapped encodings: a "\n" or "\r\n" that ends a line of base64
// characters only (the base64 and base64url alphabets, no padding) and is
// followed by another such character. Every encoder that wraps its output
// (base64(1) at any -w, openssl base64, Python's base64.encodebytes, MIME,
// xxd -p, a PEM body) breaks lines so, and in the view a secret's base64
// (or hex, or a key's body) is one run wherever it sits in the encoded
// data and however it is wrapped, and a multi-line key is matched whatever
// its line ends or wrap width. A line with any other byte (a space, "=",
// a quote) keeps its break: text is seen as it is, and costs no copy.
//
// Whether a break is left out depends on its line, from its start, and on
// the byte after it. Patterns are put in the view by the same rule; a
// pattern's first line may begin inside a line of the input, so a pattern
// of several lines is matched in both views of its first break (see
// forms). A break next to another (a blank line) stays, so that a run of
// line ends cannot make the bytes held back grow without bound: each
// character of the view stands for at most 3 of the input.

// base64Char marks the characters of the base64 and base64url alphabets,
// without the padding "=", which only ends an encoding.
var base64Char = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_") {
		t[c] = true
	}
	return t
}()

// cut is a line break left out of the view: y is the index in the view of
// the character after it, x that character's index in the input.
type cut struct{ y, x int }

// view is the input of one scan, x, and its view y without the breaks in
// cuts, leaving out the last pend bytes of the input: a break, or a "\r",
// at the end of a line of base64 characters, whose next byte has not
// arrived.
type view struct {
	x, y []byte
	cuts []cut
	pend int
	buf  []byte  // y's storage when it is a copy
	nl   []int32 // room for the indexes of line breaks (see newlines)
}

// views holds the views of ended streams and scans, for the next: each
// grows its buffers to what it scans (a stream of numbers, each on its
// line, cuts every break: 20,000 lines grew 640 KB of cuts), and with a
// new view for every stream and every Redact, these were a third of what
// serve allocated under a mixed load.
var views = sync.Pool{New: func() any { return new(view) }}

// putView gives v (nil: none) back to views, holding no input.
func putView(v *view) {
	if v != nil {
		v.x, v.y = nil, nil
		views.Put(v)
	}
}

// build makes v's view of x. prev is the byte before x (0 for none) and
// pure whether the bytes of x's first line before x are all base64
// characters (true for none). With end set the input ends there, and a
// break at its end stays; otherwise a break or "\r" at the end of a line
// of base64 characters is pending. The view is x itself when no break is
// left out, else a copy in v's buffer.
func (v *view) build(prev byte, pure bool, x []byte, end bool) {
	v.x, v.cuts, v.pend = x, v.cuts[:0], 0
	n := len(x)
	// lineStart is where the current line begins (-1: before x, where its
	// bytes are all base64 characters if pure is set).
	lineStart := -1
	if !end && n > 0 {
		switch x[n-1] {
		case '\n':
			v.pend = 1
			if n >= 2 && x[n-2] == '\r' {
				v.pend = 2
			}
		case '\r':
			v.pend = 1
		}
	}
	// from is the first byte not yet in a copied view.
	from := 0
	copied := false
	if v.nl == nil {
		v.nl = make([]int32, 256)
	}
	for off := 0; off < n-1; {
		k, done := newlines(x[off:min(n-1, off+1<<30)], v.nl)
		for _, j := range v.nl[:k] {
			i := off + int(j)
			start := i
			if start > 0 && x[start-1] == '\r' {
				start--
			}
			// Most breaks end a line of text: the byte after, or the
			// bytes before, tell so at once.
			if base64Char[x[i+1]] && endsBase64Line(x, prev, pure, lineStart, start) {
				if !copied {
					v.buf, copied = v.buf[:0], true
				}
				v.buf = append(v.buf, x[from:start]...)
				v.cuts = append(v.cuts, cut{y: len(v.buf), x: i + 1})
				from = i + 1
			}
			lineStart = i + 1
		}
		off += done
	}
	// A break (or "\r") at the end waits for the next byte only if it
	// ends a line of base64 characters.
	if v.pend > 0 && !endsBase64Line(x, prev, pure, lineStart, n-v.pend) {
		v.pend = 0
	}
	if !copied {
		v.y = x[:n-v.pend]
		return
	}
	v.buf = append(v.buf, x[from:n-v.pend]...)
	v.y = v.buf
}

// endsBase64Line reports whether x[:to] ends a non-empty line of base64
// characters only that began at lineStart (-1: before x, after prev,
// where it was all base64 characters if pure is set). It looks back from
// to and stops at the first other byte, which text has near the end of
// every line.
func endsBase64Line(x []byte, prev byte, pure bool, lineStart, to int) bool {
	if to == 0 {
		return lineStart < 0 && pure && base64Char[prev]
	}
	for i := to - 1; i >= max(lineStart, 0); i-- {
		if !base64Char[x[i]] {
			return false
		}
	}
	return lineStart >= 0 && to > lineStart || lineStart < 0 && pure
}

// pureAt reports whether the line of x at index i, before it, is of
// base64 characters only: what build's pure is for input that begins at
// i. pure is that of x's start.
func (v *view) pureAt(i int, pure bool) bool {
	for i--; i >= 0; i-- {
		switch c := v.x[i]; {
		case c == '\n':
			return true
		case !base64Char[c]:
			return false
		}
	}
	return pure
}

// cursor maps indexes of a view, taken in increasing order, to the
// input's.
type cursor struct {
	v *view
	k int // cuts[:k] are at or before the last index mapped
}

// x returns the input index of the view's character j (j may be len(y):
// the end of what the view holds).
func (c *cursor) x(j int) int {
	for c.k < len(c.v.cuts) && c.v.cuts[c.k].y <= j {
		c.k++
	}
	if c.k == 0 {
		return j
	}
	last := c.v.cuts[c.k-1]
	return last.x + j - last.y
}

// normalize returns the view of b alone, its first line taken as the end
// of a line of base64 characters (pure) or of any other: what a pattern
// is matched as.
func normalize(b []byte, pure bool) []byte {
	var v view
	v.build(0, pure, b, true)
	return v.y
}
