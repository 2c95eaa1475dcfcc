package wire

import "bytes"

// Span is where a JSON value lies in the text it was found in:
// text[Start:End]. A member not found has Start = End = -1.
type Span struct{ Start, End int }

// Found reports whether the member was there.
func (s Span) Found() bool { return s.Start >= 0 }

// Members finds the values of members of obj, which must be exactly one
// well-formed JSON object, at one level or more: levels[0] names members
// of obj, and each further level names members of the object that is the
// value of the last member named by the level before (a value that is not
// an object has none). Values are stepped over without being decoded, at
// any depth, and each byte is looked at once, however deep it lies, so a
// long value nested in the members searched (an upload's content) costs
// one pass. spans[l][k] is where the value of levels[l][k] lies in obj.
//
// It reports ok only when what a decoder would take for each member named
// is certain from the names as written: no name is given twice in the
// object it is searched in, and no member's name there holds an escape
// (which a decoder reads as what it stands for, so "\u0069d" says "id").
func Members(obj []byte, levels ...[]string) (spans [][]Span, ok bool) {
	spans = make([][]Span, len(levels))
	for l, keys := range levels {
		spans[l] = make([]Span, len(keys))
		for k := range keys {
			spans[l][k] = Span{-1, -1}
		}
	}
	s := scanner{b: obj}
	s.ws()
	if !s.members(levels, spans) || !s.end() {
		return nil, false
	}
	return spans, true
}

// members steps over the object at s.i, finding the members levels[0]
// names in it, and the deeper levels in the value of its last one.
func (s *scanner) members(levels [][]string, spans [][]Span) bool {
	keys := levels[0]
	if !s.eat('{') {
		return false
	}
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		key := s.i
		if !s.str() {
			return false
		}
		name := s.b[key+1 : s.i-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			return false
		}
		if !s.colon() {
			return false
		}
		start := s.i
		into := len(levels) > 1 && string(name) == keys[len(keys)-1] && s.i < len(s.b) && s.b[s.i] == '{'
		if into && !s.members(levels[1:], spans[1:]) || !into && !s.value() {
			return false
		}
		for i, k := range keys {
			if string(name) == k {
				if spans[0][i].Found() {
					return false
				}
				spans[0][i] = Span{start, s.i}
			}
		}
		s.ws()
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
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
