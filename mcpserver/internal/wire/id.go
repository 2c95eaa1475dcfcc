package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
)

// RequestID returns the JSON text of the "id" member of the JSON object
// that frame holds, when that member is a string or a number, and whole,
// which reports whether frame is exactly one well-formed JSON object.
//
// It reads only the top level: the other members' values are checked and
// stepped over without being decoded, at any depth, so a frame nested
// deeper than a JSON decoder allows still gives its id, wherever the id
// stands. As decoders do, the last "id" member counts; one whose value is
// null, true, false, an object or an array gives none. On a frame that
// breaks off or goes wrong, the members read before the fault count: an id
// is taken only from a member whose value is complete and followed by ','
// or '}', so that the frame up to the end of that value, closed with '}',
// is an object with that id. id is a part of frame, not a copy.
func RequestID(frame []byte) (id json.RawMessage, whole bool) {
	id, _, whole = requestID(frame)
	return id, whole
}

// requestID is RequestID, and where the id's value ends in frame.
func requestID(frame []byte) (id json.RawMessage, end int, whole bool) {
	s := scanner{b: frame}
	s.ws()
	if !s.eat('{') {
		return nil, 0, false
	}
	s.ws()
	if s.eat('}') {
		return nil, 0, s.end()
	}
	for {
		s.ws()
		key := s.i
		if !s.str() {
			return id, end, false
		}
		isID := isIDKey(frame[key:s.i])
		s.ws()
		if !s.eat(':') {
			return id, end, false
		}
		s.ws()
		start := s.i
		if !s.value() {
			return id, end, false
		}
		val := frame[start:s.i]
		s.ws()
		if s.i >= len(frame) || (frame[s.i] != ',' && frame[s.i] != '}') {
			return id, end, false
		}
		if isID {
			id, end = nil, 0
			if c := val[0]; c == '"' || c == '-' || (c >= '0' && c <= '9') {
				id, end = json.RawMessage(val), start+len(val)
			}
		}
		if s.eat('}') {
			return id, end, s.end()
		}
		s.i++ // ','
	}
}

// TailID returns the JSON text of the request id in the last member of a
// JSON object, read backwards from the object's last bytes (tail): the
// member "id", with a string or a number, right before the closing '}',
// and preceded by ',' or '{' within tail. For the end of a well-formed
// object this is the top-level id that decoders take (the last one).
// Bytes before the member are not seen, so for the end of a line that is
// not JSON it is only a guess.
func TailID(tail []byte) json.RawMessage {
	id, _ := tailID(tail)
	return id
}

// tailID is TailID, and where in tail the ',' or '{' before the member is.
func tailID(tail []byte) (json.RawMessage, int) {
	i := len(tail)
	back := func() {
		for i > 0 && isSpace(tail[i-1]) {
			i--
		}
	}
	back()
	if i == 0 || tail[i-1] != '}' {
		return nil, 0
	}
	i--
	back()
	end := i
	var start int
	switch {
	case i == 0:
		return nil, 0
	case tail[i-1] == '"':
		if start = openingQuote(tail, i-1); start < 0 {
			return nil, 0
		}
		if s := (scanner{b: tail[:end], i: start}); !s.str() || s.i != end {
			return nil, 0
		}
	default:
		for start = i; start > 0 && isNumberByte(tail[start-1]); start-- {
		}
		if s := (scanner{b: tail[:end], i: start}); start == end || !s.number() || s.i != end {
			return nil, 0
		}
	}
	i = start
	back()
	if i == 0 || tail[i-1] != ':' {
		return nil, 0
	}
	i--
	back()
	if i == 0 || tail[i-1] != '"' {
		return nil, 0
	}
	key := openingQuote(tail, i-1)
	if key < 0 {
		return nil, 0
	}
	if s := (scanner{b: tail[:i], i: key}); !s.str() || s.i != i || !isIDKey(tail[key:i]) {
		return nil, 0
	}
	i = key
	back()
	if i == 0 || (tail[i-1] != ',' && tail[i-1] != '{') {
		return nil, 0
	}
	return json.RawMessage(tail[start:end]), i - 1
}

// openingQuote returns the index of the quote that opens the string whose
// closing quote is at close, or -1 when tail does not show it: the first
// quote before close that an even number of backslashes precedes, with
// something other than a backslash before those within tail.
func openingQuote(tail []byte, close int) int {
	for q := close - 1; q >= 0; q-- {
		if tail[q] != '"' {
			continue
		}
		n := 0
		for q-n-1 >= 0 && tail[q-n-1] == '\\' {
			n++
		}
		if q-n-1 < 0 {
			return -1 // the run of backslashes may go on before tail
		}
		if n%2 == 0 {
			return q
		}
	}
	return -1
}

// isIDKey reports whether key, a well-formed JSON string with its quotes,
// says "id". Escapes count as what they stand for, as decoders read them:
// "\u0069d" is "id" too.
func isIDKey(key []byte) bool {
	if string(key) == `"id"` {
		return true
	}
	// "id" with both letters escaped is 14 bytes long; longer keys say
	// something else.
	if len(key) > len(`"\u0069\u0064"`) || bytes.IndexByte(key, '\\') < 0 {
		return false
	}
	var s string
	return json.Unmarshal(key, &s) == nil && s == "id"
}

// scanner checks JSON text without decoding it.
type scanner struct {
	b []byte
	i int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func (s *scanner) ws() {
	for s.i < len(s.b) && isSpace(s.b[s.i]) {
		s.i++
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end reports whether nothing but white space follows.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// str steps over the string at s.i, reporting whether it is well formed.
func (s *scanner) str() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.b) {
		s.i += plain(s.b[s.i:])
		if s.i >= len(s.b) {
			break
		}
		switch c := s.b[s.i]; {
		case c == '"':
			s.i++
			return true
		case c == '\\':
			if s.i+1 >= len(s.b) {
				return false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return false
					}
				}
				s.i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

// plain is how many bytes at the start of b, in steps of eight, hold no
// quote, backslash or control character: string text that needs no look.
// A long string (an upload's content) is stepped over 32 bytes at a time.
func plain(b []byte) int {
	n := 0
	for ; len(b)-n >= 32; n += 32 {
		w := b[n : n+32]
		if special(binary.LittleEndian.Uint64(w))|special(binary.LittleEndian.Uint64(w[8:]))|
			special(binary.LittleEndian.Uint64(w[16:]))|special(binary.LittleEndian.Uint64(w[24:])) != 0 {
			break
		}
	}
	for ; len(b)-n >= 8; n += 8 {
		if special(binary.LittleEndian.Uint64(b[n:])) != 0 {
			break
		}
	}
	return n
}

// special has the high bit set in some byte of x, eight bytes of string
// text, when one of them is a quote, a backslash or a control character.
func special(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// x-0x20 in each byte borrows where a byte is below 0x20, which bytes
	// with their high bit set (not below) cannot show; a byte equal to c
	// is a zero byte of x^c.
	q, bs := x^'"'*ones, x^'\\'*ones
	return ((x-0x20*ones)&^x | (q-ones)&^q | (bs-ones)&^bs) & highs
}

// number steps over the number at s.i, reporting whether it is one.
func (s *scanner) number() bool {
	digits := func() bool {
		start := s.i
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i > start
	}
	s.eat('-')
	if !s.eat('0') && !digits() {
		return false
	}
	if s.eat('.') && !digits() {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if !digits() {
			return false
		}
	}
	return true
}

// literal steps over word.
func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// scalar steps over a string, number or literal at s.i.
func (s *scanner) scalar() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		return s.str()
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	}
	return s.number()
}

// value steps over one value of any depth, reporting whether it is well
// formed. It keeps one bit per open object or array, so the depth it
// takes is bounded by the frame only.
func (s *scanner) value() bool {
	var open bitStack // true: an object
	for {
		// A value starts here.
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case '{':
			s.i++
			s.ws()
			if !s.eat('}') {
				open.push(true)
				if !s.member() {
					return false
				}
				continue
			}
		case '[':
			s.i++
			s.ws()
			if !s.eat(']') {
				open.push(false)
				continue
			}
		default:
			if !s.scalar() {
				return false
			}
		}
		// A value ended: close what it ends, or go on to the next.
		for {
			if open.len() == 0 {
				return true
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			inObject := open.top()
			c := s.b[s.i]
			s.i++
			if c == ',' {
				if inObject && !s.member() {
					return false
				}
				break
			}
			if inObject && c == '}' || !inObject && c == ']' {
				open.pop()
				continue
			}
			return false
		}
	}
}

// member steps over an object member's name and colon.
func (s *scanner) member() bool {
	s.ws()
	if !s.str() {
		return false
	}
	s.ws()
	return s.eat(':')
}

// bitStack is a stack of bools, 64 to a word.
type bitStack struct {
	words []uint64
	n     int
}

func (b *bitStack) len() int { return b.n }

func (b *bitStack) push(v bool) {
	if b.n/64 == len(b.words) {
		b.words = append(b.words, 0)
	}
	w, bit := b.n/64, uint(b.n%64)
	if v {
		b.words[w] |= 1 << bit
	} else {
		b.words[w] &^= 1 << bit
	}
	b.n++
}

func (b *bitStack) top() bool {
	i := b.n - 1
	return b.words[i/64]&(1<<uint(i%64)) != 0
}

func (b *bitStack) pop() { b.n-- }
