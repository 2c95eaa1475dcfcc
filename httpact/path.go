package httpact

import (
	"net/url"
	"strings"
)

// maxDecodeLevels bounds how many times a path segment is percent-decoded
// when looking for a dot segment, a control character or a backslash that a
// server decoding more than once would see.
const maxDecodeLevels = 4

// confinePath joins the agent's path rel under the escaped base path
// baseEsc ("" for the root, no trailing slash). It returns the escaped path
// to send and the decoded path relative to the base ("/a/b"), which is what
// Endpoint.Allow is asked about.
//
// Literal "." and ".." segments are resolved; ".." that would leave the base
// is refused. Every segment is then decoded up to maxDecodeLevels times, and
// a level that shows a dot segment (also before a ';' parameter), a control
// character, a backslash or an empty piece split off by an encoded slash is
// refused: such a path means different things to different servers.
func confinePath(baseEsc, rel string) (escaped, clean string, err error) {
	if strings.HasPrefix(rel, "//") {
		return "", "", pathError("must not start with \"//\" (a host cannot be given)")
	}
	if hasScheme(rel) {
		return "", "", pathError("must be a path, not an absolute URL")
	}
	for i := 0; i < len(rel); i++ {
		switch c := rel[i]; {
		case isControl(c):
			return "", "", pathError("contains a control character")
		case c == '?':
			return "", "", pathError("contains '?': pass query parameters in query")
		case c == '#':
			return "", "", pathError("contains '#': fragments are not sent")
		case c == '\\':
			return "", "", pathError("contains a backslash")
		case c == '%':
			if i+2 >= len(rel) || !isHex(rel[i+1]) || !isHex(rel[i+2]) {
				return "", "", pathError("has an invalid percent-encoding")
			}
		}
	}

	parts := strings.Split(rel, "/")
	segs := make([]string, 0, len(parts))
	for _, s := range parts {
		switch s {
		case "", ".":
			continue
		case "..":
			if len(segs) == 0 {
				return "", "", pathError("escapes the base path")
			}
			segs = segs[:len(segs)-1]
			continue
		}
		if err := checkSegment(s); err != nil {
			return "", "", err
		}
		segs = append(segs, escapeSegment(s))
	}
	last := parts[len(parts)-1]
	trailing := len(parts) > 1 && (last == "" || last == "." || last == "..")

	var b strings.Builder
	b.WriteString(baseEsc)
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(s)
	}
	if trailing || b.Len() == 0 {
		b.WriteByte('/')
	}
	escaped = b.String()

	b.Reset()
	for _, s := range segs {
		d, _ := url.PathUnescape(s) // s was validated by checkSegment
		b.WriteByte('/')
		b.WriteString(d)
	}
	if b.Len() == 0 {
		b.WriteByte('/')
	}
	return escaped, b.String(), nil
}

// checkSegment refuses a segment that some decoding of it turns into
// something other than one or more ordinary segments.
func checkSegment(s string) error {
	level := s
	for n := 0; ; n++ {
		if n > 0 {
			for i := 0; i < len(level); i++ {
				switch {
				case isControl(level[i]):
					return pathError("has an encoded control character")
				case level[i] == '\\':
					return pathError("has an encoded backslash")
				}
			}
		}
		for _, piece := range strings.Split(level, "/") {
			if piece == "" {
				return pathError("has an encoded slash that makes an empty segment")
			}
			if i := strings.IndexByte(piece, ';'); i >= 0 {
				piece = piece[:i]
			}
			if piece == "." || piece == ".." {
				if n == 0 {
					return pathError("has a dot segment with parameters")
				}
				return pathError("has an encoded dot segment")
			}
		}
		if n == maxDecodeLevels || !strings.Contains(level, "%") {
			return nil
		}
		dec, err := url.PathUnescape(level)
		if err != nil || dec == level {
			return nil // a literal '%' from here on: nothing more to decode
		}
		level = dec
	}
}

// escapeSegment keeps the agent's percent-encoding (an API may need %2F
// inside a segment) and escapes every byte that may not appear raw in a
// path segment.
func escapeSegment(s string) string {
	const hexDigits = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || segmentByte(c) {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(s)+8), s[:i]...)
		}
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	if b == nil {
		return s
	}
	return string(b)
}

// segmentByte reports whether c may appear unescaped in a path segment
// (RFC 3986 pchar without pct-encoded).
func segmentByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

// hasScheme reports whether s starts like an absolute URL ("http:...").
func hasScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9', c == '+', c == '-', c == '.':
			if i == 0 {
				return false
			}
		case c == ':':
			return i > 0
		default:
			return false
		}
	}
	return false
}

func pathError(reason string) error { return &RequestError{Field: "path", Reason: reason} }
