package audit

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
)

// KeyName is the keyring item that holds the audit key.
const KeyName = "actiongw-audit-key"

// CheckpointName is the keyring item that holds the checkpoint of the
// audit log of stateDir. Each state directory has its own: the name ends
// in a hash of the directory's absolute path, symbolic links resolved.
func CheckpointName(stateDir string) string {
	dir, err := filepath.Abs(stateDir)
	if err == nil {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
	}
	sum := sha256.Sum256([]byte(dir))
	return "actiongw-audit-checkpoint-" + hex.EncodeToString(sum[:8])
}

// Key is the key of a keyed log: any bytes, as kept in the keyring. It
// prints as "[audit key]" in every format, in slog and in JSON, so that
// options printed or logged show no key.
type Key []byte

const keyShown = "[audit key]"

// Format writes "[audit key]" for every verb.
func (Key) Format(f fmt.State, verb rune) { f.Write([]byte(keyShown)) }

// LogValue makes slog log "[audit key]".
func (Key) LogValue() slog.Value { return slog.StringValue(keyShown) }

// MarshalText makes JSON (and slog's JSON of a struct that holds a Key)
// show "[audit key]".
func (Key) MarshalText() ([]byte, error) { return []byte(keyShown), nil }

// KeyPrefix begins every audit key NewKey makes. The redactor keeps the
// key out of every result, and holds output back while it could be the
// key's beginning: a key of bare hex digits that began with digits held
// screens of numbers (about one key in three). Behind a prefix that
// output never shows, it holds nothing such; the prefix is public, and
// the redactor knows it so (redact's tokenPrefixes). A key made before
// it has none, and keeps working.
const KeyPrefix = "actiongw-audit-v1-"

// NewKey returns a new audit key: KeyPrefix and 32 random bytes as 64
// hex characters, the form in which it is kept in the keyring and passed
// as Options.Key.
func NewKey() Key {
	b := make([]byte, 32)
	rand.Read(b) // never fails; see crypto/rand
	return []byte(KeyPrefix + hex.EncodeToString(b))
}

// Checkpoint pins a record of a keyed log: its seq and MAC. Kept outside
// the state directory, it shows a log emptied, cut short before it, or
// replaced, which the files alone cannot.
type Checkpoint struct {
	Seq int64
	MAC string
}

// MarshalText returns "SEQ:MAC", the form in which a checkpoint is kept
// in the keyring.
func (c Checkpoint) MarshalText() ([]byte, error) {
	return fmt.Appendf(nil, "%d:%s", c.Seq, c.MAC), nil
}

// UnmarshalText parses what MarshalText returns.
func (c *Checkpoint) UnmarshalText(b []byte) error {
	seq, mac, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(seq, 10, 64)
	if _, herr := hex.DecodeString(mac); !ok || err != nil || n < 1 || len(mac) != 64 || herr != nil {
		return fmt.Errorf("audit checkpoint: %q is not SEQ:MAC", b)
	}
	c.Seq, c.MAC = n, mac
	return nil
}
