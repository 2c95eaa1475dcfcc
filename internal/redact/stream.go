package redact

// Stream is the streaming form of a Redactor: it passes redacted bytes to
// an emit function and produces exactly what Redact would on the whole
// input. It holds back at most MaxHoldback bytes: from the first position
// whose first bytes (up to 3) begin a pattern, until as many bytes as the
// longest pattern they begin have arrived, however the bytes after them go
// on, so that what it holds tells nothing of a secret past its first 3
// bytes. A Stream is used by one goroutine.
type Stream struct {
	r    *Redactor
	emit func([]byte)
	// carry is the undecided end of the input: empty, or bytes whose first
	// ones begin a pattern and what follows them, shorter than the longest
	// pattern.
	carry []byte
}

// NewStream returns a Stream that emits to emit; a nil Redactor passes
// everything through.
func (r *Redactor) NewStream(emit func([]byte)) *Stream {
	w := &Stream{r: r, emit: emit}
	if r != nil && r.maxLen > 0 {
		w.carry = make([]byte, 0, 2*r.maxLen)
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
	if len(w.carry) > 0 {
		// Decide the held-back positions with at most maxLen bytes of p
		// appended, which decides them all; carry has room for them, so
		// this never allocates.
		held := len(w.carry)
		take := min(len(p), r.maxLen)
		tmp := append(w.carry, p[:take]...)
		i, _ := r.scan(tmp, false, w.emit)
		if take == len(p) {
			w.carry = append(w.carry[:0], tmp[i:]...)
			return
		}
		p = p[i-held:]
		w.carry = w.carry[:0]
	}
	i, _ := r.scan(p, false, w.emit)
	w.carry = append(w.carry[:0], p[i:]...)
}

// Close ends the stream: the held-back bytes are decided as the end of the
// input, as Redact decides them.
func (w *Stream) Close() {
	if len(w.carry) == 0 {
		return
	}
	w.r.scan(w.carry, true, w.emit)
	w.carry = w.carry[:0]
}

// Cut ends a stream that stopped early (a cancel, a timeout, a drain cap).
// The held-back bytes may begin a pattern whose rest was cut off, so they
// are never emitted: they are replaced, all of them, with the marker of
// the shortest pattern their first bytes begin, whether or not the rest of
// them goes on with it (which would tell that it does).
func (w *Stream) Cut() {
	if len(w.carry) == 0 {
		return
	}
	w.emit(w.r.heldBy(w.carry).shortest.replacement)
	w.carry = w.carry[:0]
}
