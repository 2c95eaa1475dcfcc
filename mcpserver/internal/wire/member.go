package wire

import "bytes"

// Span is where a JSON value lies in the text it was found in:
// text[Start:End]. A member not found has Start = End = -1.
type Span struct{ Start, End int }

// Found reports whether the member was there.
func (s Span) Found() bool { return s.Start >= 0 }

// Members finds the values of the members named keys in obj, which must
// be exactly one well-formed JSON object; the values are stepped over
// without being decoded, at any depth. It reports ok only when what a
// decoder would take for each key is certain from the names as written:
// no key names two members, and no member's name holds an escape (which
// a decoder reads as what it stands for, so "\u0069d" says "id").
func Members(obj []byte, keys ...string) (spans []Span, ok bool) {
	spans = make([]Span, len(keys))
	for i := range spans {
		spans[i] = Span{-1, -1}
	}
	s := scanner{b: obj}
	s.ws()
	if !s.eat('{') {
		return nil, false
	}
	s.ws()
	if s.eat('}') {
		return spans, s.end()
	}
	for {
		s.ws()
		key := s.i
		if !s.str() {
			return nil, false
		}
		name := obj[key+1 : s.i-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return nil, false
		}
		if !s.colon() {
			return nil, false
		}
		start := s.i
		if !s.value() {
			return nil, false
		}
		for i, k := range keys {
			if string(name) == k {
				if spans[i].Found() {
					return nil, false
				}
				spans[i] = Span{start, s.i}
			}
		}
		s.ws()
		if s.eat('}') {
			return spans, s.end()
		}
		if !s.eat(',') {
			return nil, false
		}
	}
}

// colon steps over the colon after a member's name and the white space
// around it.
func (s *scanner) colon() bool {
	s.ws()
	if !s.eat(':') {
		return false
	}
	s.ws()
	return true
}
