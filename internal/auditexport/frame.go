package auditexport

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/actiongw/actiongw/internal/audit"
)

const (
	// facility is authpriv (10), for security and authorization messages
	// that may hold private details, as a record's commands and paths do:
	// syslog daemons route it to a file only administrators read
	// (Debian's /var/log/auth.log), never to a world-readable one. "log
	// audit" (13) would fit the name, but glibc, rsyslog and syslog-ng
	// neither name it nor route it by default, so records would land in
	// a catch-all file or nowhere.
	facility = 10
	// Severities: warning for what a reader of the trail should look at,
	// informational for the rest.
	severityWarning = 4
	severityInfo    = 6

	// sdID is the structured data element of a record's fields. 32473 is
	// the private enterprise number IANA reserves for documentation (RFC
	// 5612): actiongw has none registered, and one would replace it here.
	sdID = "actiongw@32473"
	// resentID is an element without parameters on a record sent again
	// after a reconnect: it may have arrived before.
	resentID = "actiongw-resent@32473"
	appName  = "actiongw"
	// bom starts a MSG in UTF-8 (RFC 5424, section 6.4).
	bom = "\xef\xbb\xbf"
)

// The words of a record that make it a warning. The gateway writes the
// first two, and has this package below it, so they are spelled here;
// TestSeverity checks them against its constants.
const (
	decisionDeny      = "deny"                   // an intent policy refused
	statusDenied      = "denied"                 // an outcome policy refused
	statusInterrupted = audit.StatusInterrupted  // its server died while it ran
	kindRepair        = string(audit.KindRepair) // the log cut a torn line off
)

// encoder turns record lines into syslog frames. It is not safe for
// concurrent use.
type encoder struct {
	hostname, procID string
	msg              []byte  // scratch: the message being built
	fs               []field // scratch: its fields
}

func newEncoder(hostname string, pid int) *encoder {
	return &encoder{hostname: headerField(hostname, 255), procID: strconv.Itoa(pid)}
}

// headerField is s as an RFC 5424 header field: printable US-ASCII only,
// at most max bytes, and "-" (the NILVALUE) when nothing is left.
func headerField(s string, max int) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s) && len(b) < max; i++ {
		if c := s[i]; c >= 33 && c <= 126 {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "-"
	}
	return string(b)
}

// frame appends to dst one octet-counted frame (RFC 6587): the length of
// the message, a space, and the RFC 5424 message of the record line:
//
//	<PRI>1 TIMESTAMP HOSTNAME actiongw PID KIND [actiongw@32473 NAME="VALUE"...] BOM LINE
//
// Every top-level field of the line with a value that is not null is one
// SD-PARAM, in the line's order: a string as its text, anything else
// (numbers, booleans, objects) as its JSON. The MSG is the line itself,
// so the record is recovered, and its hash and MAC checked, byte for
// byte. A line that is not a JSON object gets no structured data. resent
// adds the element resentID.
func (e *encoder) frame(dst, line []byte, resent bool) []byte {
	fs, h, ok := fields(e.fs[:0], line)
	e.fs = fs
	m := append(e.msg[:0], '<')
	m = strconv.AppendInt(m, facility*8+int64(h.severity()), 10)
	m = append(m, ">1 "...)
	if t := h.time.UTC(); h.time.IsZero() || t.Year() < 0 || t.Year() > 9999 {
		m = append(m, '-')
	} else {
		// At most 6 digits of a second (TIME-SECFRAC).
		m = h.time.UTC().AppendFormat(m, "2006-01-02T15:04:05.000000Z07:00")
	}
	m = append(m, ' ')
	m = append(m, e.hostname...)
	m = append(m, " "+appName+" "...)
	m = append(m, e.procID...)
	m = append(m, ' ')
	m = append(m, headerField(h.kind, 32)...)
	m = append(m, ' ')
	if ok {
		m = append(m, "["+sdID...)
		for _, f := range fs {
			m = append(m, ' ')
			m = append(m, f.name...)
			m = append(m, '=', '"')
			m = appendParamValue(m, f.value)
			m = append(m, '"')
		}
		m = append(m, ']')
	}
	if resent {
		m = append(m, "["+resentID+"]"...)
	}
	if !ok && !resent {
		m = append(m, '-')
	}
	m = append(m, ' ')
	if utf8.Valid(line) {
		m = append(m, bom...)
	}
	m = append(m, line...)
	e.msg = m
	dst = strconv.AppendInt(dst, int64(len(m)), 10)
	dst = append(dst, ' ')
	return append(dst, m...)
}

// appendParamValue appends v as a PARAM-VALUE: '"', '\' and ']' escaped
// with a backslash (RFC 5424, section 6.3.3); a control character (C0,
// DEL, C1) or a line or paragraph separator (U+2028, U+2029) as the six
// characters \uXXXX, which RFC 5424 reads as themselves (a backslash
// before any other character is literal); a byte that is not UTF-8 as
// U+FFFD, as a JSON decoder reads it; everything else as it is. So no
// value can start a line, or clear a screen, at a receiver that stores
// or shows messages as text; the MSG has the exact line.
func appendParamValue(dst, v []byte) []byte {
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == ']':
				dst = append(dst, '\\', c)
			case c < 0x20 || c == 0x7f:
				dst = appendUEscape(dst, rune(c))
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(v[i:])
		switch {
		case r >= 0x80 && r <= 0x9f || r == '\u2028' || r == '\u2029':
			dst = appendUEscape(dst, r)
		case r == utf8.RuneError && n == 1:
			dst = utf8.AppendRune(dst, utf8.RuneError)
		default:
			dst = append(dst, v[i:i+n]...)
		}
		i += n
	}
	return dst
}

// appendUEscape appends r, below U+10000, as \uXXXX.
func appendUEscape(dst []byte, r rune) []byte {
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
}

// validSDName reports whether s may be an SD-NAME (a PARAM-NAME): 1 to 32
// printable US-ASCII characters but '=', ']' and '"'.
func validSDName[T string | []byte](s T) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 33 || c > 126 || c == '=' || c == ']' || c == '"' {
			return false
		}
	}
	return true
}

// field is one SD-PARAM; both usually point into the line.
type field struct{ name, value []byte }

// header is what the syslog header takes from a record.
type header struct {
	time                   time.Time
	kind, decision, status string
}

func (h header) severity() int {
	if h.decision == decisionDeny || h.status == statusDenied || h.status == statusInterrupted || h.kind == kindRepair {
		return severityWarning
	}
	return severityInfo
}

// fields returns the top-level fields of the JSON object line, in order,
// as SD-PARAMs: those whose name is no SD-NAME (no record has one) and
// those whose value is null are left out. ok is false when line is not a
// JSON object.
func fields(fs []field, line []byte) (_ []field, h header, ok bool) {
	if !json.Valid(line) {
		return fs, header{}, false
	}
	i := skipSpace(line, 0)
	if line[i] != '{' {
		return fs, header{}, false
	}
	// json.Valid vouches for the syntax: what follows only finds where
	// each key and value ends.
	for i = skipSpace(line, i+1); line[i] != '}'; {
		end := stringEnd(line, i)
		name := unquote(line[i:end])
		i = skipSpace(line, skipSpace(line, end)+1) // past the colon
		end = valueEnd(line, i)
		v := line[i:end]
		if i = skipSpace(line, end); line[i] == ',' {
			i = skipSpace(line, i+1)
		}
		if !validSDName(name) || string(v) == "null" {
			continue
		}
		if v[0] == '"' {
			v = unquote(v)
			switch string(name) {
			case "time":
				h.time, _ = time.Parse(time.RFC3339Nano, string(v))
			case "kind":
				h.kind = string(v)
			case "decision":
				h.decision = string(v)
			case "status":
				h.status = string(v)
			}
		}
		fs = append(fs, field{name, v})
	}
	return fs, h, true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the JSON string that starts at i.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the JSON value that starts at i.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && bytes.IndexByte([]byte(" \t\r\n,}]"), b[j]) < 0 {
		j++
	}
	return j
}

// unquote returns the text of the JSON string raw, as encoding/json
// decodes it: a part of raw when it has no escapes.
func unquote(raw []byte) []byte {
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body) {
		return body
	}
	var s string
	json.Unmarshal(raw, &s)
	return []byte(s)
}
