package rsyslogtest

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Message is one RFC 5424 syslog message.
type Message struct {
	Priority                                    int
	Timestamp, Hostname, AppName, ProcID, MsgID string
	// SD are the structured data elements, in order; none for "-".
	SD []Element
	// BOM says the MSG began with a byte order mark (it is UTF-8); Msg is
	// the MSG without it.
	BOM bool
	Msg []byte
}

// Element is one SD-ELEMENT.
type Element struct {
	ID     string
	Params []Param
}

// Param is one SD-PARAM, its value unescaped.
type Param struct{ Name, Value string }

// Element returns the first element with the SD-ID id.
func (m *Message) Element(id string) (Element, bool) {
	for _, e := range m.SD {
		if e.ID == id {
			return e, true
		}
	}
	return Element{}, false
}

// Param returns the value of the first parameter name of element id.
func (m *Message) Param(id, name string) (string, bool) {
	e, _ := m.Element(id)
	for _, p := range e.Params {
		if p.Name == name {
			return p.Value, true
		}
	}
	return "", false
}

// ParseFrame parses the octet-counted frame at the start of b ("LEN SP
// MSG", RFC 6587, section 3.4.1) and returns its message and what follows
// it.
func ParseFrame(b []byte) (*Message, []byte, error) {
	sp := bytes.IndexByte(b, ' ')
	if sp < 1 || b[0] == '0' {
		return nil, nil, errors.New("frame: no MSG-LEN")
	}
	n, err := strconv.Atoi(string(b[:sp]))
	if err != nil || n < 1 {
		return nil, nil, fmt.Errorf("frame: MSG-LEN %q", b[:sp])
	}
	rest := b[sp+1:]
	if n > len(rest) {
		return nil, nil, fmt.Errorf("frame: MSG-LEN %d, %d bytes follow", n, len(rest))
	}
	m, err := Parse(rest[:n])
	return m, rest[n:], err
}

// Parse parses one RFC 5424 message strictly: a header whose fields are
// printable US-ASCII, structured data whose values escape '"', '\' and
// ']' (an unescaped ']' in a value is an error), and the MSG.
func Parse(b []byte) (*Message, error) {
	p := &parser{b: b}
	m := &Message{}
	if !p.eat('<') {
		return nil, p.fail("no PRI")
	}
	pri := p.until('>')
	if !p.eat('>') || len(pri) < 1 || len(pri) > 3 {
		return nil, p.fail("PRI")
	}
	var err error
	if m.Priority, err = strconv.Atoi(string(pri)); err != nil || m.Priority > 191 {
		return nil, p.fail("PRI value")
	}
	if !p.eat('1') || !p.eat(' ') {
		return nil, p.fail("VERSION")
	}
	for _, f := range []*string{&m.Timestamp, &m.Hostname, &m.AppName, &m.ProcID, &m.MsgID} {
		v := p.until(' ')
		if len(v) == 0 || !p.eat(' ') {
			return nil, p.fail("header field")
		}
		for _, c := range v {
			if c < 33 || c > 126 {
				return nil, p.fail("a header field with a byte that is not printable US-ASCII")
			}
		}
		*f = string(v)
	}
	if !p.eat('-') {
		for p.peek() == '[' {
			e, err := p.element()
			if err != nil {
				return nil, err
			}
			m.SD = append(m.SD, e)
		}
		if len(m.SD) == 0 {
			return nil, p.fail("STRUCTURED-DATA")
		}
	}
	if p.i == len(p.b) {
		return m, nil
	}
	if !p.eat(' ') {
		return nil, p.fail("no SP before MSG")
	}
	m.Msg = p.b[p.i:]
	if m.BOM = bytes.HasPrefix(m.Msg, []byte("\xef\xbb\xbf")); m.BOM {
		m.Msg = m.Msg[3:]
	}
	return m, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) fail(what string) error {
	return fmt.Errorf("rfc5424: %s at byte %d", what, p.i)
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) eat(c byte) bool {
	if p.peek() == c && p.i < len(p.b) {
		p.i++
		return true
	}
	return false
}

// until returns the bytes up to the first c, or to the end.
func (p *parser) until(c byte) []byte {
	start := p.i
	for p.i < len(p.b) && p.b[p.i] != c {
		p.i++
	}
	return p.b[start:p.i]
}

// name reads an SD-NAME: 1 to 32 printable US-ASCII but '=', ' ', ']' and
// '"'.
func (p *parser) name() (string, error) {
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c < 33 || c > 126 || c == '=' || c == ']' || c == '"' {
			break
		}
		p.i++
	}
	if n := p.i - start; n < 1 || n > 32 {
		return "", p.fail("SD-NAME")
	}
	return string(p.b[start:p.i]), nil
}

func (p *parser) element() (Element, error) {
	p.eat('[')
	id, err := p.name()
	if err != nil {
		return Element{}, err
	}
	e := Element{ID: id}
	for p.eat(' ') {
		name, err := p.name()
		if err != nil {
			return Element{}, err
		}
		if !p.eat('=') || !p.eat('"') {
			return Element{}, p.fail(`no =" after PARAM-NAME`)
		}
		v, err := p.value()
		if err != nil {
			return Element{}, err
		}
		e.Params = append(e.Params, Param{name, v})
	}
	if !p.eat(']') {
		return Element{}, p.fail("SD-ELEMENT without its ]")
	}
	return e, nil
}

// value reads a PARAM-VALUE after its opening quote, and the closing one.
func (p *parser) value() (string, error) {
	var v []byte
	for p.i < len(p.b) {
		c := p.b[p.i]
		p.i++
		switch c {
		case '"':
			return string(v), nil
		case ']':
			return "", p.fail("an unescaped ] in a PARAM-VALUE")
		case '\\':
			// Only these three are escapes; a backslash before anything
			// else is itself.
			if n := p.peek(); n == '"' || n == '\\' || n == ']' {
				c = n
				p.i++
			}
		}
		v = append(v, c)
	}
	return "", p.fail("PARAM-VALUE without its closing quote")
}
