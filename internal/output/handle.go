package output

import (
	"crypto/rand"
	"strings"
)

// NewHandle returns a new unguessable handle, of the form the spool gives
// its actions, for a call that has no output to spool (one that did not
// start) but whose audit records must name it.
func NewHandle() string {
	b := make([]byte, handleRandomBytes)
	rand.Read(b) // never fails; see crypto/rand
	return handlePrefix + strings.ToLower(handleEncoding.EncodeToString(b))
}
