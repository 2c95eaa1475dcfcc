package httpact

import (
	"fmt"
	"net/http"
	"strings"
)

// Why each class of special header is refused.
const (
	whyRange  = "it asks for part of the body, so a credential split across parts passes redaction one piece at a time"
	whyMethod = "it makes some servers run another method than the one this endpoint's methods policy allowed"
	whyPath   = "it makes some servers route to another path than the one this endpoint's paths policy allowed"
)

// specialHeaders are request headers an agent may set only where the
// endpoint lists them in AllowSpecialHeaders. Each makes the server change
// the form of the body, so that a credential in it no longer looks like
// itself to redaction, or act on another method or path than the one the
// policy decided on. Accept and Accept-Language choose among
// representations without re-encoding one, and are not here.
var specialHeaders = []struct{ name, why string }{
	{"Accept-Encoding", "it makes the server compress the body, and a credential in a compressed body passes redaction unseen (actiongw asks for gzip itself and decodes it)"},
	{"Accept-Charset", "it makes some servers re-encode the body's text (UTF-16, ...), a form redaction does not match"},
	{"A-IM", "it asks for the body as a delta encoding (RFC 3229), which redaction cannot see into"},
	{"Range", whyRange},
	{"Request-Range", whyRange}, // Apache httpd's older name for Range
	{"If-Range", whyRange},
	{"X-HTTP-Method-Override", whyMethod},
	{"X-HTTP-Method", whyMethod},
	{"X-Method-Override", whyMethod},
	{"X-Original-URL", whyPath},
	{"X-Rewrite-URL", whyPath},
}

// specialHeader returns the canonical name of a special header and why it
// is refused, or ok false if name is not special.
func specialHeader(name string) (canonical, why string, ok bool) {
	for _, s := range specialHeaders {
		if strings.EqualFold(s.name, name) {
			return s.name, s.why, true
		}
	}
	return "", "", false
}

// specialNames lists the special headers, for error messages.
func specialNames() string {
	names := make([]string, len(specialHeaders))
	for i, s := range specialHeaders {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// checkSpecial refuses a special header the endpoint does not allow.
func (e *Endpoint) checkSpecial(name string) error {
	canonical, why, ok := specialHeader(name)
	if !ok || nameMatches(e.AllowSpecialHeaders, canonical) {
		return nil
	}
	return &RequestError{Field: "headers", Reason: fmt.Sprintf(
		"%q is refused: %s; the endpoint's allow_special_headers can permit it", canonical, why)}
}

// checkAccept refuses an Accept header that names, as a media type
// parameter, a charset other than UTF-8 or US-ASCII (the same bytes)
// ("application/json;charset=UTF-16"): Spring's converters and JAX-RS
// answer in it, so it asks what Accept-Charset asks, and is allowed where
// Accept-Charset is. The value is not quoted: it is the agent's, and may
// hold anything.
func (e *Endpoint) checkAccept(name, value string) error {
	if !strings.EqualFold(name, "Accept") || nameMatches(e.AllowSpecialHeaders, "Accept-Charset") {
		return nil
	}
	for _, mediaRange := range strings.Split(value, ",") {
		params := strings.Split(mediaRange, ";")
		for _, p := range params[1:] {
			k, v, _ := strings.Cut(p, "=")
			if !strings.EqualFold(strings.TrimSpace(k), "charset") {
				continue
			}
			switch v = strings.Trim(strings.TrimSpace(v), `"`); {
			case strings.EqualFold(v, "utf-8"), strings.EqualFold(v, "us-ascii"):
			default:
				_, why, _ := specialHeader("Accept-Charset")
				return &RequestError{Field: "headers", Reason: fmt.Sprintf(
					"%q names a charset other than UTF-8 and is refused, as Accept-Charset is: %s; "+
						"the endpoint's allow_special_headers can permit it by listing Accept-Charset", "Accept", why)}
			}
		}
	}
	return nil
}

// knownCodings are content codings named in a Reason; any other value the
// server sent is not echoed, since a server may put anything in a header.
var knownCodings = []string{"gzip", "x-gzip", "deflate", "br", "zstd", "compress", "x-compress", "dcb", "dcz", "aes128gcm", "exi", "pack200-gzip"}

// undecodedCoding returns the content coding a response body is still in
// after the transport's transparent gzip decoding, or "" when the body is
// plain. Unknown codings are reported as "an unknown content coding".
func undecodedCoding(h http.Header) string {
	for _, v := range h.Values("Content-Encoding") {
		for _, c := range strings.Split(v, ",") {
			c = strings.TrimSpace(c)
			if c == "" || strings.EqualFold(c, "identity") {
				continue
			}
			for _, k := range knownCodings {
				if strings.EqualFold(c, k) {
					return k
				}
			}
			return "an unknown content coding"
		}
	}
	return ""
}
