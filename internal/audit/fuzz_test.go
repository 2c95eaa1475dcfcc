package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// jsonLen is how many bytes encodeRecord's encoder writes for s, quotes
// left out: the reference cutString is held to.
func jsonLen(s string) int {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return buf.Len() - len(`""`+"\n")
}

// FuzzCutString checks that the prefix cutString keeps is a prefix of s
// on a character boundary, encodes within the bound, and is the longest
// such: one more character would not fit.
func FuzzCutString(f *testing.F) {
	for _, s := range []string{"", "uptime", strings.Repeat("<", 40), "a\"b\\c\n\t\x01\x7f", "\xff\xfe", "é\u2028\u2029😀", "\x00"} {
		f.Add(s, 16)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<12 {
			return
		}
		prefix, whole := cutString(s, max)
		switch {
		case !strings.HasPrefix(s, prefix):
			t.Fatalf("cutString(%q, %d) = %q: not a prefix", s, max, prefix)
		case whole != (prefix == s):
			t.Fatalf("cutString(%q, %d) = %q, whole %v", s, max, prefix, whole)
		case jsonLen(prefix) > max:
			t.Fatalf("cutString(%q, %d) = %q, which encodes to %d bytes", s, max, prefix, jsonLen(prefix))
		case !boundary(s, len(prefix)):
			t.Fatalf("cutString(%q, %d) = %q: cut inside a character", s, max, prefix)
		}
		if !whole {
			_, size := utf8.DecodeRuneInString(s[len(prefix):])
			if next := s[:len(prefix)+size]; jsonLen(next) <= max {
				t.Fatalf("cutString(%q, %d) = %q, but %q fits too", s, max, prefix, next)
			}
		}
	})
}

// boundary reports whether s[:i] ends where a character of s does, as
// encoding/json reads s (an invalid byte is a character of its own).
func boundary(s string, i int) bool {
	for at := 0; at < i; {
		_, size := utf8.DecodeRuneInString(s[at:])
		at += size
		if at == i {
			return true
		}
	}
	return i == 0
}

// FuzzVerifyKeyed splices bytes into a keyed log: whatever changes, Verify
// with the key and the checkpoint finds it, unless all that changed is an
// incomplete line added at the end (a write that never completed).
func FuzzVerifyKeyed(f *testing.F) {
	var cp Checkpoint
	dir := f.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a, err := OpenWith(context.Background(), path, Options{Key: testKey, SaveCheckpoint: func(c Checkpoint) { cp = c }})
	if err != nil {
		f.Fatal(err)
	}
	appendN(f, a, 4)
	a.Close()
	orig, _ := os.ReadFile(path)
	f.Add(uint(0), uint(0), []byte("\n"))
	f.Add(uint(len(orig)), uint(0), []byte(`{"seq":6}`))
	f.Add(uint(30), uint(1), []byte("9"))
	f.Add(uint(len(orig)-3), uint(3), []byte(`"}`+"\n"))
	f.Fuzz(func(t *testing.T, at, del uint, data []byte) {
		i := int(at % uint(len(orig)+1))
		j := min(len(orig), i+int(del%64))
		mutated := append(append(bytes.Clone(orig[:i]), data...), orig[j:]...)
		if bytes.Equal(mutated, orig) {
			return
		}
		if err := os.WriteFile(path, mutated, 0o600); err != nil {
			t.Fatal(err)
		}
		rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey, Checkpoint: &cp})
		torn := bytes.HasPrefix(mutated, orig) && !bytes.Contains(mutated[len(orig):], []byte("\n"))
		if err == nil && !(torn && rep.Torn == int64(len(mutated)-len(orig))) {
			t.Fatalf("a log changed at byte %d (%d bytes out, %q in) verifies:\n%s", i, j-i, data, rep)
		}
	})
}
