package redact

// Stream is the streaming form of a Redactor: it passes redacted bytes to
// an emit function and produces exactly what Redact would on the whole
// input. It holds back at most MaxHoldback bytes: from the first position
// whose bytes, as far as they go, agree with the head of a pattern (its
// first 3 bytes, or, for a pattern with a public prefix, the bytes every
// value of its kind shares, such as a key's armour, and 3 bytes more: see
// Forms), until as many bytes have arrived as the longest hold of the
// patterns whose head they agree with (a bound of their length that
// depends on the length of their secret alone: see form), however the
// bytes after the head go on, so that what it holds tells nothing of a
// secret past the first 3 bytes after its public prefix; and a line
// break after a base64 character until the byte after it says whether it
// is left out of the view (see join.go). A Stream is used by one
// goroutine.
type Stream struct {
	r    *Redactor
	emit func([]byte)
	// carry is the undecided end of the input: bytes held back from the
	// first position whose first bytes begin a pattern, or a pending line
	// break; prev is the byte before it, and pure whether its line before
	// it is of base64 characters only (see join.go).
	carry []byte
	prev  byte
	pure  bool
	// in is the carry and a write, when there is a carry; v and c are
	// the view of the bytes being decided, and its cursor; xc is how far
	// they have been emitted.
	in []byte
	v  *view // from views, while the stream lives
	c  cursor
	xc int
	// seen has a bit for each secret (Redactor.names) a whole form of
	// which was replaced.
	seen []uint64
}

// NewStream returns a Stream that emits to emit; a nil Redactor passes
// everything through.
func (r *Redactor) NewStream(emit func([]byte)) *Stream {
	w := &Stream{r: r, emit: emit, pure: true}
	if r != nil && r.maxLen > 0 {
		w.carry = make([]byte, 0, min(r.MaxHoldback()+1, 4<<10))
	}
	return w
}

// Write redacts p; it always returns len(p), nil.
func (w *Stream) Write(p []byte) (int, error) {
	w.write(p)
	return len(p), nil
}

func (w *Stream) write(p []byte) {
	r := w.r
	if r == nil || r.maxLen == 0 {
		if len(p) > 0 {
			w.emit(p)
		}
		return
	}
	// In parts: a view that copies its input stays small, and a small
	// carry is decided with the first bytes of p alone, so that the rest
	// of p, with nothing carried, is its own view without a copy.
	for len(p) > 0 {
		n := min(len(p), maxWrite)
		if len(w.carry) > 0 && len(w.carry) < carryFirst {
			n = min(n, carryFirst)
		}
		w.decide(p[:n], false)
		p = p[n:]
	}
}

const (
	// maxWrite is the most of one write decided at once.
	maxWrite = 64 << 10
	// carryFirst is how many bytes of a write a carry shorter than it is
	// decided with first.
	carryFirst = 256
)

// decide scans the carry and then p, emits what it decides, and keeps the
// rest as the carry. With end set the input ends after p.
func (w *Stream) decide(p []byte, end bool) {
	x := p
	if len(w.carry) > 0 {
		w.in = append(append(w.in[:0], w.carry...), p...)
		x = w.in
	}
	w.view().build(w.prev, w.pure, x, end)
	w.c = cursor{v: w.v}
	w.xc = 0
	next := w.r.scan(w.v.y, end, w.match)
	w.emitTo(w.c.x(next))
	// Keep the rest, and what comes before it.
	if w.xc > 0 {
		w.prev = x[w.xc-1]
		w.pure = w.v.pureAt(w.xc, w.pure)
	}
	w.carry = append(w.carry[:0], x[w.xc:]...)
	w.v.x = nil
}

// emitTo emits the input from xc to x.
func (w *Stream) emitTo(x int) {
	if x > w.xc {
		w.emit(w.v.x[w.xc:x])
		w.xc = x
	}
}

// match emits what comes before a pattern at view positions [s, e), and
// the pattern's marker in place of it and of the line breaks inside it.
func (w *Stream) match(s, e int, p *pattern) {
	w.emitTo(w.c.x(s))
	w.emit(p.replacement)
	w.xc = w.c.x(e-1) + 1
	if w.seen == nil {
		w.seen = make([]uint64, (len(w.r.names)+63)/64)
	}
	w.seen[p.secret/64] |= 1 << (p.secret % 64)
}

// Close ends the stream: the held-back bytes are decided as the end of the
// input, as Redact decides them.
func (w *Stream) Close() {
	if len(w.carry) > 0 {
		w.decide(nil, true)
	}
	w.release()
}

// view is the stream's view, from views at its first use.
func (w *Stream) view() *view {
	if w.v == nil {
		w.v = views.Get().(*view)
	}
	return w.v
}

// release lets go of the buffers of an ended stream: an action's captures
// outlive it, for its result and for reads.
func (w *Stream) release() {
	putView(w.v)
	w.carry, w.in, w.v, w.c = nil, nil, nil, cursor{}
}

// Cut ends a stream that stopped early (a cancel, a timeout, a drain cap).
// The held-back bytes may begin a pattern whose rest was cut off, so they
// are never emitted: they are replaced, all of them, with the marker of
// the shortest pattern their first bytes begin, whether or not the rest of
// them goes on with it (which would tell that it does). Line breaks before
// them, and a pending one that begins no pattern, are emitted.
func (w *Stream) Cut() {
	defer w.release()
	breaks, p := w.pending()
	if p != nil {
		breaks = append(breaks, p.replacement...)
	}
	if len(breaks) > 0 {
		w.emit(breaks)
	}
}

// Pending is what the stream holds back, as far as it may be shown
// before it is decided: the line breaks it holds (those before held
// bytes, or a pending one that begins no pattern), and whether bytes
// that may begin a pattern follow them. Those are held, all of them,
// by their first bytes as far as heads go (see Stream), as a Cut would
// replace them, so that whether they are held tells nothing of a secret
// past the first 3 bytes after its public prefix. A
// reader that must show something of what the stream holds while it
// waits (a terminal's screen at a pause) shows the breaks and a marker;
// the stream goes on to decide the bytes as if it had not been asked.
// The result is the caller's.
func (w *Stream) Pending() (breaks []byte, held bool) {
	breaks, p := w.pending()
	return breaks, p != nil
}

// pending is Pending, with the pattern whose marker replaces the held
// bytes at a cut (see Redactor.heldBy).
func (w *Stream) pending() ([]byte, *pattern) {
	if len(w.carry) == 0 {
		return nil, nil
	}
	v := w.view() // rebuilt by the next decide
	v.build(w.prev, w.pure, w.carry, true)
	c := cursor{v: v}
	held := w.carry
	var breaks []byte
	if x := c.x(0); len(v.y) > 0 && x > 0 {
		breaks = append(breaks, held[:x]...)
		held = held[x:]
	}
	if _, p := w.r.heldBy(v.y); len(v.y) > 0 && p != nil {
		return breaks, p
	}
	return append(breaks, held...), nil
}

// Matched returns the names of the secrets a whole form of which the
// stream replaced so far, sorted. A marker that replaced held-back bytes
// at a Cut does not count: those bytes only began a pattern.
func (w *Stream) Matched() []string {
	if w.seen == nil {
		return nil
	}
	var names []string
	for i, name := range w.r.names {
		if w.seen[i/64]&(1<<(i%64)) != 0 {
			names = append(names, name)
		}
	}
	return names
}
