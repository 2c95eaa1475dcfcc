package gateway

import (
	"bytes"
	"crypto/ed25519"
	"encoding/pem"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/actiongw/actiongw/internal/redact"
)

// TestShownStreamKeyPrefix: with a target's OpenSSH key as a secret, a
// screen whose output holds what every such key begins with ("623", hex
// of its body's "b3B"; "---") shows it at once, not [HELD] until kilobytes
// more arrive; the key's armour and 3 bytes of its body are still held.
func TestShownStreamKeyPrefix(t *testing.T) {
	block, err := ssh.MarshalPrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)), "")
	if err != nil {
		t.Fatal(err)
	}
	key := pem.EncodeToMemory(block)
	red, err := redact.New([]redact.Secret{{Name: "box-key", Value: key}})
	if err != nil {
		t.Fatal(err)
	}
	armour := "-----BEGIN OPENSSH PRIVATE KEY-----\n"
	for _, tt := range []struct{ name, out, shown, held string }{
		{"a pid", "bash-5.2$ echo 1623\r\n1623\r\nbash-5.2$ ", "bash-5.2$ echo 1623\r\n1623\r\nbash-5.2$ ", ""},
		{"a diff", "--- a/f\r\n+++ b/f\r\n$ ", "--- a/f\r\n+++ b/f\r\n$ ", ""},
		{"the key's start", "$ cat id\r\n" + armour + string(key[len(armour):len(armour)+3]), "$ cat id\r\n", heldMarker},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var shown []byte
			s := &shownStream{}
			s.stream = red.NewStream(func(b []byte) { shown = append(shown, b...) })
			s.Write([]byte(tt.out))
			if held, _ := s.pending(); string(shown) != tt.shown || string(held) != tt.held {
				t.Errorf("after %q: shown %q, held %q; want %q, %q", tt.out, shown, held, tt.shown, tt.held)
			}
		})
	}
}
