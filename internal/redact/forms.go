package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Forms returns every pattern one secret value yields, sorted, each at
// least MinSecretLen bytes long and as the redactor matches it: without
// the line breaks between base64 characters (see join.go); nil for a
// value shorter than MinSecretLen.
//
// The value is taken as it is, without trailing line ends (what
// `$(cat file)` or `head -c -1` give), and, if it has several lines, with
// LF and with CRLF line ends. Each PEM or SSH2 block in it (a private
// key, a certificate of a bundle) is taken alone too, with its armour and
// as its bare body, the base64 between the armour lines, which is what
// `grep -v -- -----` of a key file gives. Each of those gives a pattern
// raw and one in every encoding: JSON string escapes, URL escapes, hex in
// both cases, base64 and base64url at every alignment inside longer data.
// With line breaks between base64 characters left out of the match, these
// cover the encodings wrapped at any width too.
//
// Every pattern begins with the first 3 bytes of the value or of a
// block's body (which are the same for every key of a kind): a part of a
// value, such as one line of a key, is not a pattern of its own. A
// redactor that replaced parts would tell, by whether it replaced them,
// whether a guess of a part was right, and so the whole part by part.
//
// A pattern's public prefix is the bytes of it that are the same for
// every value of its kind: those of a PEM begin line with its line end,
// and of the base64 of "openssh-key-v1\x00" that an OpenSSH key's body
// begins with, in whatever form the pattern is (see publicLen); none for
// any other value. A stream holds bytes back only once they agree with a
// pattern's public prefix and 3 bytes more (see Stream).
func Forms(value []byte) []string {
	var texts []string
	for _, f := range forms(value) {
		texts = append(texts, f.text)
	}
	return texts
}

// form is a pattern and how many bytes a stream holds back from where its
// first bytes begin (see head): a bound of its length that depends on
// the length of the value it encodes alone. Escapes make a value's JSON
// up to 6 times as long (\u00XX for a byte) and its URL escapes 3 times,
// by how many of its bytes they escape; a hold as long as the pattern
// would tell that.
//
// head is how many of its first bytes the bytes of a stream must agree
// with, as far as they go, to be held: its public prefix, the bytes that
// are the same for every value of its kind (see publicLen), and 3 bytes
// more, or the whole pattern if it is shorter. Bytes that only agree with
// the public prefix tell nothing of a secret, and a hold that began there
// would stall every output that holds them ("623", hex of the start of
// every OpenSSH key's body).
//
// heads are the heads the same form of its value's siblings begins with,
// where they differ from its own (see encoding): bytes that agree with
// one of them are held as by its own head, so that which bytes are held
// does not tell a byte past the head.
type form struct {
	text       string
	hold, head int
	heads      []string
}

// headLen is how many bytes of a form are its head beyond its public
// prefix; see form.
const headLen = 3

// forms is Forms with the holds and heads, sorted by text; a text two
// values give keeps the longer hold and the shorter head.
func forms(value []byte) []form {
	if len(value) < MinSecretLen {
		return nil
	}
	var out []form
	for _, v := range wholes(value) {
		// The value with the bytes after its public prefix changed, in
		// two ways (see alterations): a form's public prefix is as long
		// as it agrees with both of their forms.
		public := publicLen(v)
		alts := alterations(v, public)
		for _, e := range encodings(v) {
			texts := e.encode(v)
			var altTexts, sibTexts [][]string
			for _, a := range alts {
				altTexts = append(altTexts, e.encode(a))
			}
			if e.siblings != nil && public+headLen < len(v) {
				for _, s := range e.siblings(v[:public+headLen], public) {
					sibTexts = append(sibTexts, e.encode(s))
				}
			}
			for i, t := range texts {
				// Its first line may begin a line of base64 characters of
				// the input, or end one of any other bytes (see join.go).
				for _, pure := range []bool{true, false} {
					f := normalize([]byte(t), pure)
					if len(f) < MinSecretLen {
						continue
					}
					formPublic := 0
					if len(alts) > 0 {
						formPublic = len(f)
						for _, a := range altTexts {
							formPublic = min(formPublic, commonPrefix(f, normalize([]byte(a[i]), pure)))
						}
					}
					fm := form{text: string(f), hold: max(e.hold, len(f)), head: min(len(f), formPublic+headLen)}
					for _, st := range sibTexts {
						if g := normalize([]byte(st[i]), pure); len(g) >= fm.head && !bytes.HasPrefix(f, g[:fm.head]) {
							fm.heads = append(fm.heads, string(g[:fm.head]))
						}
					}
					out = append(out, fm)
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b form) int { return strings.Compare(a.text, b.text) })
	merged := out[:0]
	for _, f := range out {
		if n := len(merged); n > 0 && merged[n-1].text == f.text {
			m := &merged[n-1]
			m.hold = max(m.hold, f.hold)
			m.head = min(m.head, f.head)
			m.heads = append(m.heads, f.heads...)
			continue
		}
		merged = append(merged, f)
	}
	for i := range merged {
		m := &merged[i]
		for j, h := range m.heads {
			m.heads[j] = h[:m.head]
		}
		slices.Sort(m.heads)
		m.heads = slices.Compact(m.heads)
		m.heads = slices.DeleteFunc(m.heads, func(h string) bool { return h == m.text[:m.head] })
	}
	return merged
}

// encoding is one way forms encodes a value: the texts it gives, as many
// for every value as long as the one it was made for, and their hold.
//
// siblings, where set, returns values that share a prefix (a value's
// public bytes and 3 more) and go on in every way that changes how the
// encoding writes those bytes, where the bytes after them can: nil for
// most prefixes. They depend on the prefix alone, so every value that
// shares it holds the same bytes back: a form's heads are those of the
// same form of its siblings (see form).
type encoding struct {
	hold     int
	encode   func(v []byte) []string
	siblings func(prefix []byte, public int) [][]byte
}

// encodings lists the encodings of v: raw, JSON in the styles that make
// a difference for v, URL escapes, hex in both cases, and base64.
func encodings(v []byte) []encoding {
	styles := jsonStyles(v)
	return []encoding{
		{6 * len(v), func(v []byte) []string { return []string{string(v)} }, breakSiblings},
		{6 * len(v), func(v []byte) []string {
			var texts []string
			for _, st := range styles {
				texts = append(texts, string(appendJSON(nil, v, st)))
			}
			return texts
		}, utf8Siblings},
		{6 * len(v), urlForms, nil},
		// The lengths of these are the value's length's alone.
		{0, func(v []byte) []string {
			return []string{hex.EncodeToString(v), strings.ToUpper(hex.EncodeToString(v))}
		}, nil},
		{0, base64Forms, nil},
	}
}

// pemBegin is a PEM (RFC 7468) begin line of a label of capitals, digits
// and spaces, with its line end: what a block of a private key begins
// with.
var pemBegin = regexp.MustCompile(`^-----BEGIN [A-Z0-9 ]+-----\r?\n`)

// opensshMagic is the base64 of "openssh-key-v1\x00", the first 15 bytes
// of every OpenSSH private key: its body begins with it.
var opensshMagic = []byte(base64.StdEncoding.EncodeToString([]byte("openssh-key-v1\x00")))

// tokenPrefixes are the prefixes that providers put in front of every
// token of a kind, in their documentation, so that scanners can find
// them: GitHub, GitLab, Slack, Stripe, npm, PyPI, OpenAI, Anthropic,
// Google's API keys and AWS's key ids; and our own audit log's key
// (audit.KeyPrefix). Each says what the token is and nothing of it.
// Longer ones first, where one begins another.
var tokenPrefixes = []string{
	"actiongw-audit-v1-",
	"github_pat_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat-",
	"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xapp-",
	"sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_",
	"npm_", "pypi-", "sk-ant-", "sk-proj-", "sk-", "AIza", "AKIA", "ASIA",
}

// derSequence is the base64 of a DER SEQUENCE of 256 to 16383 bytes
// (0x30 0x82 and a first length byte below 0x40): what the body of a
// PKCS#1 or PKCS#8 RSA key, and most other PEM keys, begins with. It says
// what the key's length already tells.
const derSequence = "MII"

// publicLen is how many of v's first bytes are the same for every value
// of its kind, and so tell nothing of it: a token's prefix
// (tokenPrefixes), or a PEM begin line with its line end, which says what
// the block is, and after it (or alone, as a bare body) opensshMagic or
// derSequence. The rule is kept small: a longer public prefix (an
// OpenSSH key's cipher and key type) would save little, and a wider one
// (any armour-like first line) would make a secret's first line public.
// 0 for any other value.
func publicLen(v []byte) int {
	for _, p := range tokenPrefixes {
		if bytes.HasPrefix(v, []byte(p)) {
			return len(p)
		}
	}
	n := 0
	if m := pemBegin.FindIndex(v); m != nil {
		n = m[1]
	}
	switch {
	case bytes.HasPrefix(v[n:], opensshMagic):
		n += len(opensshMagic)
	case bytes.HasPrefix(v[n:], []byte(derSequence)):
		n += len(derSequence)
	}
	return n
}

// alterations returns v with every byte after its first public ones
// changed, in two ways, or nil when public is 0. A form's public prefix
// is as long as it agrees with the same form of both: raw, JSON and URL
// escapes write a byte as itself or as an escape that begins with "\\"
// or "%", and the first way writes a plain letter, unlike both; hex and
// base64 write a byte's bits in order, and the second way flips them
// all. So their forms part from v's where v's form first depends on a
// byte past the public ones, whatever that byte is.
func alterations(v []byte, public int) [][]byte {
	if public == 0 {
		return nil
	}
	letter, flipped := slices.Clone(v), slices.Clone(v)
	for i := public; i < len(v); i++ {
		letter[i] = 'a'
		if v[i] == 'a' {
			letter[i] = 'b'
		}
		flipped[i] = ^v[i]
	}
	return [][]byte{letter, flipped}
}

// utf8Siblings is siblings for JSON: a UTF-8 sequence that the bytes of
// the prefix after its public ones begin and do not end is written as
// itself, as \ufffd for each byte when the bytes after do not go on with
// it (Go's encoding/json), or as \u2028 or \u2029. The bytes after are
// the edges of every range a sequence's next byte may be in, and a byte
// that none goes on with.
func utf8Siblings(prefix []byte, public int) [][]byte {
	if !slices.ContainsFunc(prefix[public:], func(c byte) bool { return c >= utf8.RuneSelf }) {
		return nil
	}
	next := []byte{0x80, 0xa8, 0xa9, 0xbf, 'a'}
	return extend([][]byte{prefix}, []byte{0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xa8, 0xa9, 0xbf, 'a'}, next, next)
}

// breakSiblings is siblings for the raw value: the view leaves a line
// break among the bytes of the prefix after its public ones out when a
// base64 character follows it (see join.go), and the head then holds
// that character; a CR last among them is a line end when a LF follows
// it, which the value with LF line ends writes as LF (see wholes).
func breakSiblings(prefix []byte, public int) [][]byte {
	if !bytes.ContainsAny(prefix[public:], "\r\n") {
		return nil
	}
	prefixes := [][]byte{prefix}
	if prefix[len(prefix)-1] == '\r' {
		prefixes = append(prefixes, append(slices.Clone(prefix[:len(prefix)-1]), '\n'))
	}
	var next []byte
	for c := range 256 {
		if base64Char[c] {
			next = append(next, byte(c))
		}
	}
	next = append(next, '!', '\r', '\n')
	return extend(prefixes, next, next)
}

// extend returns every prefix followed by a byte of each of next in
// turn, in every combination, and a few bytes more: a sibling's head is
// all that is taken of its form.
func extend(prefixes [][]byte, next ...[]byte) [][]byte {
	out := prefixes
	for _, bs := range next {
		var longer [][]byte
		for _, p := range out {
			for _, b := range bs {
				longer = append(longer, append(slices.Clip(p), b))
			}
		}
		out = longer
	}
	for i := range out {
		out[i] = append(out[i], "aaaaaaaa"...)
	}
	return out
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// wholes lists the values Forms encodes: the value, without trailing line
// ends, with LF and with CRLF line ends if it has several lines, and the
// same for each block in it (see blocks) and its body, and the body's
// lines joined.
func wholes(value []byte) [][]byte {
	trimmed := bytes.TrimRight(value, "\r\n")
	var out [][]byte
	add := func(v []byte) {
		for _, v := range [][]byte{v, bytes.TrimRight(v, "\r\n")} {
			out = append(out, v)
			if bytes.ContainsRune(v, '\n') {
				lf := bytes.ReplaceAll(v, []byte("\r\n"), []byte("\n"))
				out = append(out, lf, bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n")))
			}
		}
	}
	add(value)
	for block, body := range blocks(trimmed) {
		add(block)
		add(body)
		// Its lines joined: the body as one line, or wrapped anew, where
		// its padding may be a line of its own.
		joined := bytes.ReplaceAll(bytes.ReplaceAll(body, []byte("\r"), nil), []byte("\n"), nil)
		out = append(out, bytes.TrimRight(joined, "="))
	}
	slices.SortFunc(out, bytes.Compare)
	out = slices.CompactFunc(out, bytes.Equal)
	// Line ends alone, trimmed: nothing to encode.
	return slices.DeleteFunc(out, func(v []byte) bool { return len(v) == 0 })
}

// blocks yields each PEM (RFC 7468) or SSH2 (RFC 4716) block of v, from
// its begin line to its end line, and its body: the lines between them as
// they are (`grep -v -- -----` of a key file), leaving out headers
// ("Proc-Type: …", "Comment: …", and the lines a header continues on),
// which say what the block is and are public.
func blocks(v []byte) func(yield func(block, body []byte) bool) {
	return func(yield func(block, body []byte) bool) {
		start := -1
		var body []byte
		continued := false
		for at := 0; at < len(v); {
			end := at + bytes.IndexByte(v[at:], '\n') + 1
			if end == at {
				end = len(v)
			}
			line := bytes.TrimSpace(v[at:end])
			switch {
			case isArmour(line) && start < 0:
				start, body, continued = at, nil, false
			case isArmour(line):
				if len(body) > 0 && !yield(bytes.TrimRight(v[start:end], "\r\n"), body) {
					return
				}
				start = -1
			case start >= 0 && (continued || bytes.IndexByte(line, ':') >= 0):
				continued = bytes.HasSuffix(line, []byte("\\"))
			case start >= 0 && len(line) > 0:
				body = append(body, v[at:end]...)
			}
			at = end
		}
	}
}

// isArmour reports whether a line, spaces trimmed, is a PEM (RFC 7468) or
// SSH2 (RFC 4716) armour line, which says what follows and is public.
func isArmour(line []byte) bool { return bytes.HasPrefix(line, []byte("----")) }

// base64Forms lists, for the standard and URL-safe alphabets, the base64 of
// v alone (unpadded: the padded text contains it) and, for each alignment,
// the characters of v's base64 inside longer data that v alone decides.
//
// Base64 takes 3 bytes at a time, so v may start 0, 1 or 2 bytes into a
// group (alignment a). Encoding a zero bytes and then v, the first
// ceil(8a/6) characters hold bits of the bytes before v, and the
// characters from floor(8(a+len(v))/6) on hold bits of the bytes after it:
// both are dropped, and what is left is in every encoding of data that
// holds v at that alignment.
func base64Forms(v []byte) []string {
	var forms []string
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		forms = append(forms, enc.EncodeToString(v))
		for a := range 3 {
			s := enc.EncodeToString(append(make([]byte, a), v...))
			forms = append(forms, s[(8*a+5)/6:8*(a+len(v))/6])
		}
	}
	return forms
}

// urlForms lists v escaped as a query value, as a path segment, with
// every byte but the unreserved ones escaped (Python's quote(v, safe="")),
// and with those and "/" kept (quote(v), whose default keeps "/": how many
// servers escape a base64 token), each with upper- and lower-case hex.
func urlForms(v []byte) []string {
	q := url.QueryEscape(string(v))
	all := strings.ReplaceAll(q, "+", "%20")
	forms := []string{q, url.PathEscape(string(v)), all, strings.ReplaceAll(all, "%2F", "/")}
	for _, f := range forms[:4] {
		forms = append(forms, lowerPercentHex(f))
	}
	return forms
}

func lowerPercentHex(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '%' && i+2 < len(b) {
			b[i+1], b[i+2] = lowerHex(b[i+1]), lowerHex(b[i+2])
		}
	}
	return string(b)
}

func lowerHex(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// jsonStyle is one way an encoder writes a JSON string.
type jsonStyle struct {
	html  bool // <, > and & as \u003c, \u003e, \u0026 (Go's json.Marshal)
	slash bool // / as \/ (PHP, some Java and Ruby encoders)
	ascii bool // non-ASCII as \uXXXX (Python's json.dumps, PHP)
	upper bool // upper-case hex in \u escapes (Jackson, .NET)
}

// jsonStyles lists the combinations of jsonStyle that make a
// difference for v: v inside a JSON string is written in each of them.
func jsonStyles(v []byte) []jsonStyle {
	var slash, html, ascii, escapes bool
	for _, c := range v {
		slash = slash || c == '/'
		html = html || c == '<' || c == '>' || c == '&'
		ascii = ascii || c >= utf8.RuneSelf
		escapes = escapes || c < 0x20 && !bytes.ContainsRune([]byte("\b\f\n\r\t"), rune(c))
	}
	// Upper-case hex matters only where there are \u escapes.
	upper := escapes || html || ascii
	var styles []jsonStyle
	for bits := range 16 {
		st := jsonStyle{html: bits&1 != 0, slash: bits&2 != 0, ascii: bits&4 != 0, upper: bits&8 != 0}
		if st.html && !html || st.slash && !slash || st.ascii && !ascii || st.upper && !upper {
			continue // the same as a style without that knob
		}
		styles = append(styles, st)
	}
	return styles
}

// appendJSON escapes src as a JSON string body in style st. Control
// characters and invalid UTF-8 are written as Go's encoding/json writes
// them, as are U+2028 and U+2029, which it always escapes.
func appendJSON(dst, src []byte, st jsonStyle) []byte {
	digits := "0123456789abcdef"
	if st.upper {
		digits = "0123456789ABCDEF"
	}
	u := func(dst []byte, r rune) []byte {
		return append(dst, '\\', 'u', digits[r>>12&0xF], digits[r>>8&0xF], digits[r>>4&0xF], digits[r&0xF])
	}
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '/' && st.slash:
				dst = append(dst, '\\', '/')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20 || st.html && (c == '<' || c == '>' || c == '&'):
				dst = u(dst, rune(c))
			default:
				dst = append(dst, c)
			}
			continue
		}
		r, size := utf8.DecodeRune(src[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = u(dst, utf8.RuneError)
		case r == '\u2028' || r == '\u2029':
			dst = u(dst, r)
		case st.ascii && r > 0xFFFF:
			r -= 0x10000
			dst = u(u(dst, 0xD800+r>>10), 0xDC00+r&0x3FF)
		case st.ascii:
			dst = u(dst, r)
		default:
			dst = append(dst, src[i:i+size]...)
		}
		i += size
	}
	return dst
}
