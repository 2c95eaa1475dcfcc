package secrets

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// readme is where a person reads how to run a Secret Service without a
// desktop session.
const readme = "https://github.com/actiongw/actiongw#running-a-secret-service-on-a-headless-linux-server"

// ErrNoService matches (with errors.Is) every *NoServiceError.
var ErrNoService = errors.New("no Secret Service is reachable")

// NoServiceError reports that no Secret Service answered on the D-Bus
// session bus, so no keyring item can be read or written.
type NoServiceError struct {
	// Err says why: no bus address, a bus that refuses the connection, no
	// Secret Service on the bus, or one that did not answer in time.
	Err error
}

func (e *NoServiceError) Error() string {
	return fmt.Sprintf("no Secret Service is reachable on the D-Bus session bus (%v); on a server without a desktop session, start one as shown in %s", e.Err, readme)
}

func (e *NoServiceError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNoService) true.
func (e *NoServiceError) Is(target error) bool { return target == ErrNoService }

// ErrLocked reports that the keyring's default collection is locked, or
// missing, and no unlock prompt could be shown or was accepted.
var ErrLocked = errors.New("the keyring's default collection is locked or does not exist; unlock it (gnome-keyring-daemon --unlock) as shown in " + readme)

// NotFoundError reports that the keyring holds no secret under Name.
type NotFoundError struct {
	Name string
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("secret %q is not in the keyring; store it with: actiongw secret set %s", e.Name, e.Name)
}

// NameError reports a name that cannot name a keyring item.
type NameError struct {
	Name   string
	Reason string
}

func (e *NameError) Error() string { return fmt.Sprintf("bad secret name %q: %s", e.Name, e.Reason) }

// MaxNameBytes is the longest secret name, in bytes.
const MaxNameBytes = 128

// CheckName reports, as a *NameError, whether name cannot name a keyring
// item: a name is 1 to MaxNameBytes bytes of printable characters without
// spaces, slashes or backslashes, so it reads unambiguously in an error
// message, a log line or a table.
func CheckName(name string) error {
	return checkName(name)
}

// ReservedPrefix begins the names of the items actiongw keeps for itself
// (the audit log's key and checkpoints): a config may not name them and
// `secret set` may not write them, so that neither an agent's target nor
// a person's typo can read or replace the audit key.
const ReservedPrefix = "actiongw-audit-"

// CheckUserName is CheckName for a name a person chooses: it also refuses
// the names actiongw keeps for itself.
func CheckUserName(name string) error {
	if strings.HasPrefix(name, ReservedPrefix) {
		return &NameError{name, fmt.Sprintf("names beginning with %q are actiongw's own", ReservedPrefix)}
	}
	return checkName(name)
}

func checkName(name string) error {
	if name == "" || len(name) > MaxNameBytes {
		return &NameError{name, fmt.Sprintf("a name is 1 to %d bytes long", MaxNameBytes)}
	}
	for _, r := range name {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) || unicode.IsSpace(r) || r == '/' || r == '\\' {
			return &NameError{name, "a name has printable characters only, without spaces, slashes or backslashes"}
		}
	}
	return nil
}
