package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"time"
	"unicode/utf8"

	"github.com/actiongw/actiongw/internal/owner"
)

// Record is one line of the audit log: an "intent" before an action
// runs, an "outcome" after. String fields pass the redactor before they are
// written, and a long one is kept as a prefix with the whole field's size
// and hash in Cut.
type Record struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`
	// Prev is the hex sha256 of the previous line, "" on the first of a
	// chain.
	Prev string `json:"prev"`
	// Owner is the process that wrote the record; Append sets it. An
	// intent whose owner died without an outcome was interrupted.
	Owner owner.ID `json:"owner,omitempty"`

	Handle string `json:"handle"`
	Tool   string `json:"tool"`
	Target string `json:"target"`
	// Parent is the handle of the fan-out (ssh_exec_many) an action is one
	// target of; "" for an action of its own.
	Parent string `json:"parent,omitempty"`
	// Via is the SSH target whose server opened an HTTP request's
	// connection (an endpoint behind a bastion); "" for none.
	Via string `json:"via,omitempty"`

	// Intent.
	Command string `json:"command,omitempty"`
	// Cwd is the directory the command ran in, and Env the variables set
	// for it, one NAME=value a line, sorted; both empty when not set.
	Cwd string `json:"cwd,omitempty"`
	Env string `json:"env,omitempty"`
	// Sudo is set when the command ran as root under sudo.
	Sudo bool `json:"sudo,omitempty"`
	// CertSerial is the serial (decimal) of the certificate an action on
	// a CA target logs in with; its key id is the handle. A KRL revokes
	// it by this number.
	CertSerial string `json:"cert_serial,omitempty"`
	Method     string `json:"method,omitempty"`
	Path       string `json:"path,omitempty"`
	// Size is the size of a file transfer: an upload's content in the
	// intent, the bytes that moved in the outcome.
	Size int64 `json:"size,omitempty"`
	// Source names what an upload sent when it was an earlier action's
	// stream: "HANDLE/STREAM".
	Source   string `json:"source,omitempty"`
	Decision string `json:"decision,omitempty"` // allow | deny
	Rule     string `json:"rule,omitempty"`
	// Approvals are the questions the person at the MCP client was asked
	// before the action could run, in order, with their answers.
	Approvals []Approval `json:"approvals,omitempty"`

	// Input, typed into a terminal session: the text, the named keys
	// (space-separated) and the keyring item whose value was typed.
	Input  string `json:"input,omitempty"`
	Keys   string `json:"keys,omitempty"`
	Secret string `json:"secret,omitempty"`

	// Outcome.
	Status     string            `json:"status,omitempty"`
	ExitCode   *int              `json:"exit_code,omitempty"`
	Signal     string            `json:"signal,omitempty"`
	HTTPStatus int               `json:"http_status,omitempty"`
	Streams    map[string]Stream `json:"streams,omitempty"`
	// SHA256 is the hex sha256 of the bytes a file transfer moved, as
	// they were on the wire (before any redaction of a kept copy).
	SHA256        string `json:"sha256,omitempty"`
	DurationMS    int64  `json:"duration_ms,omitempty"`
	Reason        string `json:"reason,omitempty"`
	RemoteStopped *bool  `json:"remote_stopped,omitempty"`
	// SecretsSeen names the keyring items (never their values) a whole
	// form of which came back in the action's output although its target
	// was never sent them: an HTTP token in a command's output, say. The
	// agent guessed it, or found it on the target.
	SecretsSeen []string `json:"secrets_seen,omitempty"`

	// Cut holds, by JSON field name, the size and hash of each string
	// field that was too long to keep whole; the field holds its prefix.
	Cut map[string]Stream `json:"cut,omitempty"`
	// KeyID names the key of a "key" record (not the key itself), so a
	// log keyed with another key is told apart from a forged one.
	KeyID string `json:"key_id,omitempty"`
	// Sealed is set on the "seal" record that starts a chain after a
	// damaged one was moved aside.
	Sealed *Sealed `json:"sealed,omitempty"`
	// MAC is the hex HMAC-SHA256, under the log's key, of the line without
	// it; "" in an unkeyed record. It is always the line's last field.
	MAC string `json:"mac,omitempty"`
}

// Kind is what a record is.
type Kind string

const (
	// KindIntent is written, and on disk, before an action runs.
	KindIntent Kind = "intent"
	// KindOutcome says how an action ended.
	KindOutcome Kind = "outcome"
	// KindInput is what was typed into a running terminal session, by
	// its handle: Input (redacted), Keys by name, Secret by name.
	KindInput Kind = "input"
	// KindKey starts the keyed part of a log: it and every record after
	// it carry a MAC.
	KindKey Kind = "key"
	// KindSeal is the first record of a chain that replaced a damaged one.
	KindSeal Kind = "seal"
	// KindRepair says that the end of a line whose write never completed
	// was cut off.
	KindRepair Kind = "repair"
)

// StatusInterrupted is the status of the outcome RecordInterrupted
// writes for an intent whose process died.
const StatusInterrupted = "interrupted"

// Stream is what the audit keeps of one stream, or of a field cut short:
// its size and hash.
type Stream struct {
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Sealed names the damaged chain a seal record replaces.
type Sealed struct {
	// Dir is the directory, beside the log, the damaged files were
	// moved into.
	Dir string `json:"dir"`
	// File and Line are where the damage was found (Line 0: not one line,
	// e.g. the head file).
	File   string `json:"file"`
	Line   int    `json:"line,omitempty"`
	Reason string `json:"reason"`
	// LastSeq and LastHash are the last record before the damage: the
	// sealed chain is good up to it.
	LastSeq  int64  `json:"last_seq"`
	LastHash string `json:"last_hash,omitempty"`
}

const (
	// MaxLineBytes is the longest line actiongw writes. A longer line in
	// a log is damage.
	MaxLineBytes = 64 << 10
	// fieldBytes bounds one string field as written, JSON escapes
	// included, so that every record fits in MaxLineBytes.
	fieldBytes = 2048
	// maxStreams bounds the streams of one outcome, for the same reason.
	maxStreams = 8
)

// Approval is one question a person was asked before an action ran.
type Approval struct {
	// Asked is what the question was about: "command", "request" or
	// "host_key".
	Asked string `json:"asked"`
	// Answer is approve, approve_for (the same exact action, for a
	// while), remembered (such an earlier answer, so nobody was asked),
	// decline, cancel (dismissed), timeout (no answer in time) or
	// unavailable (the client cannot ask).
	Answer string `json:"answer"`
	// WaitMS is how long the answer took.
	WaitMS int64 `json:"wait_ms"`
	// Fingerprint is the SHA256 fingerprint of a host key asked about.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Via is where the answer came from: "client" (its elicitation) or
	// "console" (the person's console); empty when nobody was asked.
	Via string `json:"via,omitempty"`
}

// MaxApprovals bounds the questions of one record: an action asks about
// itself, and about the host key of its target and of each jump host.
const MaxApprovals = 10

// prepare returns the record as Append writes it: the caller's fields,
// redacted and cut to fieldBytes, with the time and the owner set. It
// refuses what no record may be.
func prepare(rec *Record, redact func(string) string) (*Record, error) {
	switch {
	case rec.Kind != KindIntent && rec.Kind != KindOutcome && rec.Kind != KindInput:
		return nil, fmt.Errorf("audit log: a record of kind %q cannot be appended (want intent, outcome or input)", rec.Kind)
	case len(rec.Streams) > maxStreams:
		return nil, fmt.Errorf("audit log: an outcome with %d streams (at most %d)", len(rec.Streams), maxStreams)
	}
	r := *rec
	r.Seq, r.Prev, r.MAC, r.KeyID, r.Sealed, r.Cut = 0, "", "", "", nil, nil
	r.Owner = owner.Self()
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	// UTC, and a year RFC 3339 can write, so that encoding cannot fail
	// under the lock, for the whole batch.
	if r.Time = r.Time.UTC(); r.Time.Year() < 0 || r.Time.Year() > 9999 {
		return nil, fmt.Errorf("audit log: a record of the year %d", r.Time.Year())
	}
	if len(r.Approvals) > MaxApprovals {
		return nil, fmt.Errorf("audit log: a record with %d approvals (at most %d)", len(r.Approvals), MaxApprovals)
	}
	for _, a := range r.Approvals {
		if len(a.Asked) > 16 || len(a.Answer) > 16 || len(a.Fingerprint) > 64 {
			return nil, fmt.Errorf("audit log: an approval %.16q: field too long", a.Asked)
		}
	}
	for name, s := range r.Streams {
		if len(name) > 64 || len(s.SHA256) > 64 {
			return nil, fmt.Errorf("audit log: stream %.64q: name or hash too long", name)
		}
	}
	for _, f := range []struct {
		name string
		s    *string
	}{
		{"handle", &r.Handle}, {"parent", &r.Parent}, {"tool", &r.Tool}, {"target", &r.Target},
		{"command", &r.Command}, {"cwd", &r.Cwd}, {"env", &r.Env}, {"method", &r.Method}, {"path", &r.Path},
		{"decision", &r.Decision}, {"rule", &r.Rule}, {"status", &r.Status},
		{"signal", &r.Signal}, {"reason", &r.Reason}, {"source", &r.Source}, {"sha256", &r.SHA256},
		{"input", &r.Input}, {"keys", &r.Keys}, {"secret", &r.Secret},
	} {
		if redact != nil {
			*f.s = redact(*f.s)
		}
		prefix, whole := cutString(*f.s, fieldBytes)
		if whole {
			continue
		}
		if r.Cut == nil {
			r.Cut = map[string]Stream{}
		}
		sum := sha256.Sum256([]byte(*f.s))
		r.Cut[f.name] = Stream{Bytes: int64(len(*f.s)), SHA256: hex.EncodeToString(sum[:])}
		*f.s = prefix
	}
	return &r, nil
}

// cutString returns the longest prefix of s, ending on a character
// boundary, whose JSON string encoding (as encodeRecord writes it, quotes
// left out) is at most max bytes, and whether that is all of s.
func cutString(s string, max int) (prefix string, whole bool) {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += escapedLen(r, size)
		if n > max {
			return s[:i], false
		}
		i += size
	}
	return s, true
}

// escapedLen is how many bytes encoding/json, with HTML escaping off,
// writes for the character r of size bytes in a string.
func escapedLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return len(`\ufffd`)
	case r == '"' || r == '\\' || r == '\b' || r == '\f' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '\u2028' || r == '\u2029':
		return len(`\u0000`)
	}
	return size
}

// macSuffix is how a keyed line ends: `,"mac":"<64 hex>"}`.
const (
	macPrefix    = `,"mac":"`
	macSuffixLen = len(macPrefix) + 64 + len(`"}`)
)

// encodeRecord appends r to buf as one line, newline included: JSON with
// HTML escaping off (a command's < and & stay readable), and, with a
// signer, its MAC as the last field. It returns the line's hash and MAC.
func encodeRecord(buf *bytes.Buffer, r *Record, s *signer) (hash, mac string, err error) {
	start := buf.Len()
	r.MAC = ""
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return "", "", fmt.Errorf("audit log: %w", err)
	}
	if s != nil {
		body := buf.Bytes()[start : buf.Len()-1] // without the newline
		mac = s.mac(body)
		buf.Truncate(buf.Len() - 2) // `}` and the newline
		buf.WriteString(macPrefix)
		buf.WriteString(mac)
		buf.WriteString("\"}\n")
		r.MAC = mac
	}
	line := buf.Bytes()[start : buf.Len()-1]
	if len(line) > MaxLineBytes {
		// prepare's bounds make this impossible; a record that broke the
		// line bound would make the log unreadable.
		return "", "", fmt.Errorf("audit log: a record of %d bytes, more than %d", len(line), MaxLineBytes)
	}
	return lineHash(line), mac, nil
}

// splitMAC returns the MAC a keyed line ends with and the line it was
// computed over, less its closing brace; ok is false for a line that ends
// with none.
func splitMAC(line []byte) (mac string, body []byte, ok bool) {
	if len(line) < macSuffixLen+1 || !bytes.HasSuffix(line, []byte(`"}`)) {
		return "", nil, false
	}
	at := len(line) - macSuffixLen
	if !bytes.Equal(line[at:at+len(macPrefix)], []byte(macPrefix)) {
		return "", nil, false
	}
	mac = string(line[at+len(macPrefix) : len(line)-2])
	for _, c := range []byte(mac) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", nil, false
		}
	}
	return mac, line[:at], true
}

// signer computes MACs under one key. A nil *signer is no key. It is not
// safe for concurrent use.
type signer struct {
	h   hash.Hash
	sum []byte
	// id names the key without revealing it, so a log keyed with another
	// key is told apart from a forged one.
	id string
}

func newSigner(key Key) *signer {
	if key == nil {
		return nil
	}
	s := &signer{h: hmac.New(sha256.New, key)}
	s.id = s.mac([]byte("actiongw audit key id"))[:16]
	return s
}

// mac is the hex HMAC-SHA256 of the concatenated parts.
func (s *signer) mac(parts ...[]byte) string {
	s.h.Reset()
	for _, b := range parts {
		s.h.Write(b)
	}
	s.sum = s.h.Sum(s.sum[:0])
	return hex.EncodeToString(s.sum)
}

func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

func hmacEqual(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }
