package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// lineMinLen is the shortest line of a multi-line secret that is redacted
// on its own. A PEM body line is 64 (RFC 7468) or 70 (OpenSSH) characters,
// so only a key's short last line may fall below it, and that line holds
// at most 14 bytes of key material, of no use without the hidden lines.
// 20 random base64 characters are 120 bits: no other output holds them by
// chance. Shorter lines are the ones most likely to be ordinary text
// ("-----END", "}", "kind: Config"), whose marker would mangle other
// output, and short patterns narrow the scan's stride for every secret.
const lineMinLen = 20

// Forms returns every pattern one secret value yields, sorted, each at
// least MinSecretLen bytes long; nil for a value shorter than
// MinSecretLen.
//
// The value is taken as it is, without trailing line ends (what
// `$(cat file)` or `head -c -1` give), and, if it has several lines, with
// LF and with CRLF line ends. Each of those gives a pattern raw and one in
// every encoding (JSON string escapes, URL escapes, hex in both cases,
// base64 and base64url at every alignment inside longer data), and the
// lines of its base64 wrapped at 76 (base64(1), MIME) and 64 (openssl)
// columns. A value of several lines adds each line (spaces trimmed) of at
// least lineMinLen bytes, raw and in every encoding, except armour lines
// ("-----BEGIN …", "---- BEGIN SSH2 …"), which are public.
func Forms(value []byte) []string {
	if len(value) < MinSecretLen {
		return nil
	}
	var forms []string
	add := func(fs ...string) {
		for _, f := range fs {
			if len(f) >= MinSecretLen {
				forms = append(forms, f)
			}
		}
	}
	trimmed := bytes.TrimRight(value, "\r\n")
	var wholes [][]byte
	for _, v := range [][]byte{value, trimmed} {
		wholes = append(wholes, v)
		if bytes.ContainsRune(v, '\n') {
			lf := bytes.ReplaceAll(v, []byte("\r\n"), []byte("\n"))
			crlf := bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))
			wholes = append(wholes, lf, crlf)
		}
	}
	slices.SortFunc(wholes, bytes.Compare)
	for _, v := range slices.CompactFunc(wholes, bytes.Equal) {
		if len(v) == 0 {
			continue // line ends alone, trimmed: nothing to encode
		}
		add(encodings(v)...)
		add(wrapped(v)...)
	}
	if bytes.ContainsRune(trimmed, '\n') {
		for line := range bytes.SplitSeq(trimmed, []byte("\n")) {
			line = bytes.TrimSpace(line)
			if len(line) >= lineMinLen && !isArmour(line) {
				add(encodings(line)...)
			}
		}
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// isArmour reports whether a line, spaces trimmed, is a PEM (RFC 7468) or
// SSH2 (RFC 4716) armour line, which says what follows and is public.
func isArmour(line []byte) bool { return bytes.HasPrefix(line, []byte("----")) }

// wrapped returns the lines of v's base64 wrapped at 76 and at 64 columns
// that are long enough to redact on their own and encode more of v than
// armour and line ends; nothing if the base64 fits on a line. The last
// character, which the bytes after v share, is left out.
func wrapped(v []byte) []string {
	s := base64.RawStdEncoding.EncodeToString(v)[:8*len(v)/6]
	// public[i] is set for a byte of an armour line or a line end.
	public := make([]bool, len(v))
	for start := 0; start < len(v); {
		end := start + bytes.IndexByte(v[start:], '\n') + 1
		if end == start {
			end = len(v)
		}
		armour := isArmour(bytes.TrimSpace(v[start:end]))
		for i := start; i < end; i++ {
			public[i] = armour || v[i] == '\r' || v[i] == '\n'
		}
		start = end
	}
	var lines []string
	for _, width := range []int{76, 64} {
		for at := 0; len(s) > width && at < len(s); at += width {
			line := s[at:min(at+width, len(s))]
			// width is a multiple of 4: the line encodes whole bytes from
			// at/4*3 on, and part of the byte its last character ends in.
			from, to := at/4*3, min(len(v), (6*(at+len(line))+7)/8)
			if len(line) >= lineMinLen && slices.Contains(public[from:to], false) {
				lines = append(lines, line)
			}
		}
	}
	return lines
}

// encodings lists v raw and in the encodings an agent can have a host
// print: JSON string escapes, URL escapes, hex and base64.
func encodings(v []byte) []string {
	forms := []string{string(v)}
	forms = append(forms, jsonForms(v)...)
	forms = append(forms, urlForms(v)...)
	forms = append(forms, hex.EncodeToString(v), strings.ToUpper(hex.EncodeToString(v)))
	forms = append(forms, base64Forms(v)...)
	return forms
}

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

// jsonForms lists v inside a JSON string, without the quotes, in every
// combination of jsonStyle that makes a difference for v.
func jsonForms(v []byte) []string {
	var slash, html, ascii, escapes bool
	for _, c := range v {
		slash = slash || c == '/'
		html = html || c == '<' || c == '>' || c == '&'
		ascii = ascii || c >= utf8.RuneSelf
		escapes = escapes || c < 0x20 && !bytes.ContainsRune([]byte("\b\f\n\r\t"), rune(c))
	}
	// Upper-case hex matters only where there are \u escapes.
	upper := escapes || html || ascii
	var forms []string
	for bits := range 16 {
		st := jsonStyle{html: bits&1 != 0, slash: bits&2 != 0, ascii: bits&4 != 0, upper: bits&8 != 0}
		if st.html && !html || st.slash && !slash || st.ascii && !ascii || st.upper && !upper {
			continue // the same as a style without that knob
		}
		forms = append(forms, string(appendJSON(nil, v, st)))
	}
	return forms
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
