package secrets

import (
	"bytes"
	"fmt"
	"log/slog"
)

// redacted is what a Value shows wherever it is printed, logged or marshaled.
const redacted = "[secret]"

// Value is a credential. Every way of printing it (fmt verbs, slog, JSON,
// text) shows "[secret]"; [Value.Reveal] is the one way to its bytes. The
// zero Value is empty.
//
// The bytes live in a closure: where fmt cannot call Value's methods (in an
// unexported struct field, or behind a verb it does not know) it prints a
// function's address, and reflection-based dumpers find no bytes either.
type Value struct{ bytes func() []byte }

// NewValue returns a Value holding a copy of b.
func NewValue(b []byte) Value {
	c := bytes.Clone(b)
	return Value{func() []byte { return c }}
}

// Reveal returns a copy of the credential's bytes. Call it only where the
// credential is handed to the protocol that needs it.
func (v Value) Reveal() []byte {
	if v.bytes == nil {
		return nil
	}
	return bytes.Clone(v.bytes())
}

// Len returns the length of the credential in bytes.
func (v Value) Len() int {
	if v.bytes == nil {
		return 0
	}
	return len(v.bytes())
}

// IsZero reports whether v holds no bytes.
func (v Value) IsZero() bool { return v.Len() == 0 }

// String returns "[secret]".
func (v Value) String() string { return redacted }

// GoString returns "[secret]", so %#v hides the value too.
func (v Value) GoString() string { return redacted }

// Format writes "[secret]" for every verb and flag (%x and %q included).
func (v Value) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue makes slog log "[secret]".
func (v Value) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON returns the JSON string "[secret]".
func (v Value) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText returns "[secret]" (encoding/xml and TOML use it).
func (v Value) MarshalText() ([]byte, error) { return []byte(redacted), nil }
