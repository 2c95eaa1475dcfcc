package redact

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

const token = "ghp_0123456789abcdefghijKLMNOPQRSTuvwxyz"

// TestStreamCut cuts a stream at every point of a secret in some of its
// forms: what was held back is replaced, never emitted, and the output
// holds no start of the secret.
func TestStreamCut(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	key := pemKey(rng, "OPENSSH PRIVATE KEY", 399, 70)
	secrets := map[string][]byte{"gh": []byte(token), "key": key}
	r, err := newRedactor(secrets)
	if err != nil {
		t.Fatal(err)
	}
	forms := referenceForms(secrets)
	for _, tt := range []struct{ name, in string }{
		{"raw", "token: " + token + "\n"},
		{"JSON", `{"token":"` + token + `"}`},
		{"hex", "x=" + hex.EncodeToString([]byte(token))},
		{"base64 after Bearer", base64.StdEncoding.EncodeToString([]byte("Bearer " + token))},
		{"key", "$ cat id\n" + string(key)},
		{"key line", "$ sed -n 3p id\n" + strings.Split(string(key), "\n")[2] + "\n"},
	} {
		for cut := range len(tt.in) + 1 {
			var out []byte
			w := r.NewStream(func(p []byte) { out = append(out, p...) })
			for _, c := range []byte(tt.in[:cut]) {
				w.Write([]byte{c})
			}
			w.Cut()
			checkNoForm(t, out, forms)
			// What was emitted before the cut is what the whole input
			// gives; a marker may follow in place of the held-back bytes.
			want := r.Redact([]byte(tt.in[:cut]))
			if !bytes.Equal(out, want) {
				emitted := bytes.TrimSuffix(bytes.TrimSuffix(out, []byte("[REDACTED:gh]")), []byte("[REDACTED:key]"))
				if len(emitted) == len(out) || !bytes.HasPrefix(want, emitted) {
					t.Fatalf("%s cut at %d: got %q; want %q, or a prefix of it and a marker", tt.name, cut, out, want)
				}
			}
		}
	}
}

// TestStreamPending asks a stream what it holds after every byte of a
// secret in some of its forms: its breaks, and a marker if it holds
// bytes, are what a Cut there would emit; the stream, asked, goes on as
// if it had not been: closed, it emits what Redact gives for the whole.
func TestStreamPending(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	key := pemKey(rng, "OPENSSH PRIVATE KEY", 399, 70)
	secrets := map[string][]byte{"gh": []byte(token), "key": key}
	r, err := newRedactor(secrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, in string }{
		{"raw", "token: " + token + "\n$ "},
		{"raw in two parts", "A:" + token[:9] + "\x1b[0m" + token[9:] + ":Z\r\n"},
		{"base64", "b=" + base64.StdEncoding.EncodeToString([]byte(token)) + "\n"},
		{"key", "$ cat id\n" + string(key)},
	} {
		var out []byte
		w := r.NewStream(func(p []byte) { out = append(out, p...) })
		for i, c := range []byte(tt.in) {
			w.Write([]byte{c})
			breaks, held := w.Pending()
			got := append(slices.Clip(out), breaks...)
			var cut []byte
			ref := r.NewStream(func(p []byte) { cut = append(cut, p...) })
			ref.Write([]byte(tt.in[:i+1]))
			ref.Cut()
			if marker := cut[len(got):]; !bytes.HasPrefix(cut, got) || held != (len(marker) > 0) || held && !bytes.HasPrefix(marker, []byte("[REDACTED:")) {
				t.Fatalf("%s after %d bytes: emitted and pending %q, held %v; want what a cut emits, %q", tt.name, i+1, got, held, cut)
			}
		}
		w.Close()
		if want := r.Redact([]byte(tt.in)); !bytes.Equal(out, want) {
			t.Errorf("%s: closed after every Pending: %q; want %q", tt.name, out, want)
		}
	}
}

// TestStreamCutMarker checks which bytes a cut replaces, and with what.
func TestStreamCutMarker(t *testing.T) {
	r, err := newRedactor(map[string][]byte{"a": []byte("abcdefgh"), "b": []byte("abcxyz12345"), "gh": []byte(token)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"", ""},
		{"done\n", "done\n"},
		{"x g", "x [REDACTED:gh]"},
		{"x " + token[:len(token)-1], "x [REDACTED:gh]"},
		{"x ab", "x [REDACTED:a]"}, // the shortest pattern ab begins
		// By the first 3 bytes only: only b goes on with abcx, and a marker
		// that said so would tell that it does.
		{"x abcx", "x [REDACTED:a]"},
		{"x abcdefgh", "x [REDACTED:a]"},
		// A whole a is held too, until 6 times as many bytes as b has
		// have arrived (see form): whether b goes on from it would tell
		// how far the bytes match b.
		{"x abcdefgh ", "x [REDACTED:a]"},
		{"x abcdefgh abc", "x [REDACTED:a]"},
		{"x abcdefgh" + strings.Repeat(" ", 6*11-8) + "abc", "x [REDACTED:a]" + strings.Repeat(" ", 6*11-8) + "[REDACTED:a]"},
		// Fewer bytes than the longest pattern follow abc: held, whether
		// or not they go on with a secret.
		{"x abc!!!!!", "x [REDACTED:a]"},
	}
	for _, tt := range tests {
		var out []byte
		w := r.NewStream(func(p []byte) { out = append(out, p...) })
		w.Write([]byte(tt.in))
		w.Cut()
		if string(out) != tt.want {
			t.Errorf("Cut after %q: got %q; want %q", tt.in, out, tt.want)
		}
	}
}

// TestRedactEndIsNoOracle: the end of an output that begins a secret is
// not replaced, however much of it there is. A rule that replaced it (at
// least 8 bytes and half the secret, as this redactor once did) told an
// agent that ends its output with a guess whether the guess is the
// secret's first half, and then, a character at a time, the rest.
func TestRedactEndIsNoOracle(t *testing.T) {
	r, err := newRedactor(map[string][]byte{"gh": []byte(token), "pin": []byte("pin-2468-x")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"head -c -1", token[:len(token)-1], token[:len(token)-1]},
		{"half", "t=" + token[:len(token)/2], "t=" + token[:len(token)/2]},
		{"8 bytes of a 10-byte secret", "n=pin-2468", "n=pin-2468"},
		{"whole secret", "n=pin-2468-x", "n=[REDACTED:pin]"},
		{"whole secret at the end of a line", "n=pin-2468-x\n", "n=[REDACTED:pin]\n"},
	}
	for _, tt := range tests {
		if got := r.RedactString(tt.in); got != tt.want {
			t.Errorf("%s: RedactString(%q) = %q; want %q", tt.name, tt.in, got, tt.want)
		}
		if got := redactChunked(r, []byte(tt.in), []int{3}); string(got) != tt.want {
			t.Errorf("%s: streamed %q = %q; want %q", tt.name, tt.in, got, tt.want)
		}
	}
}

// TestStreamHoldsBackOnlyStarts checks that a stream emits at once every
// byte whose first bytes cannot begin a secret, so a running command's
// output is seen while it runs, however long the longest pattern.
func TestStreamHoldsBackOnlyStarts(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	key := pemKey(rng, "PRIVATE KEY", 1218, 64)
	r, err := newRedactor(map[string][]byte{"gh": []byte(token), "key": key})
	if err != nil {
		t.Fatal(err)
	}
	armour := "-----BEGIN PRIVATE KEY-----\n"
	body := string(key[len(armour):])
	tests := []struct{ in, held string }{
		{"plain line\n", ""},
		// A line break after a line of base64 characters waits for the
		// next byte, which says whether a wrapped encoding goes on past
		// it.
		{"plain line\nplainline\n", "\n"},
		{"plainline\r\n", "\r\n"},
		{"almost " + token[:10], token[:10]},
		{"x g", "g"},
		{"-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----\n"},
		// The armour is public: held by it and the first 3 bytes of the
		// body, however they go on (see TestNoOracle), and not by the
		// armour alone.
		{armour + body[:3] + "no\n", armour + body[:3] + "no\n"},
		{armour + "no\n", "\n"},
		// The token's prefix is public too (see tokenPrefixes): held by
		// it and 3 bytes more, and not by it alone.
		{"almost " + token[:7] + "!", token[:7] + "!"},
		{"almost " + token[:4] + "!", ""},
		{"almost " + token[:3] + "!", ""},
		// And in hex: a line that holds the hex of "ghp" or of "ghp_"
		// ("676", a pid) is shown at once, not held for the token's
		// hold; bytes at the end that may go on to a head wait for the
		// next byte.
		{"pid 676\n", ""},
		{"pid 6768705f\n", ""},
		{"pid 676", "676"},
		{"x 6768705f303\n", "6768705f303\n"},
		// Held only until as many bytes have arrived as the longest form
		// they could begin may have (the token's JSON with every byte
		// escaped, not the key's): then decided.
		{"not " + token[:7] + strings.Repeat("!", 6*len(token)-7), ""},
		{"not " + token[:7] + strings.Repeat("!", 6*len(token)-8), token[:7] + strings.Repeat("!", 6*len(token)-8)},
	}
	for _, tt := range tests {
		var out []byte
		w := r.NewStream(func(p []byte) { out = append(out, p...) })
		w.Write([]byte(tt.in))
		if want := tt.in[:len(tt.in)-len(tt.held)]; string(out) != want {
			t.Errorf("after %q: emitted %q; want %q", tt.in, out, want)
		}
	}
}

// referenceCut is what a stream that was written in and then cut has
// emitted. It scans the view of in as referenceRedact does, but for a line
// break at its end after a base64 character, which waits for the next
// byte, and stops at the first position whose bytes agree, as far as
// they go, with the head of a form (see form), when fewer bytes follow it
// than the longest hold of those forms, however the bytes go on past the
// heads: the cut puts the marker of the shortest of those forms (the
// first listed of two as long) in place of the rest.
func referenceCut(in []byte, forms []refForm) []byte {
	pend := 0
	switch {
	case bytes.HasSuffix(in, []byte("\r\n")):
		pend = 2
	case bytes.HasSuffix(in, []byte("\n")), bytes.HasSuffix(in, []byte("\r")):
		pend = 1
	}
	// Pending only at the end of a line of base64 characters.
	if line := in[bytes.LastIndexByte(in[:len(in)-pend], '\n')+1 : len(in)-pend]; len(line) == 0 || bytes.ContainsFunc(line, func(r rune) bool { return !strings.ContainsRune(base64Alphabet, r) }) {
		pend = 0
	}
	view, from := refView(in[:len(in)-pend])
	shortest := func(head []byte) (*refForm, int) {
		var short *refForm
		longest := 0
		for j := range forms {
			f := &forms[j]
			if n := min(len(head), f.head); bytes.Equal(head[:n], f.text[:n]) {
				longest = max(longest, f.hold)
				if short == nil || len(f.text) < len(short.text) {
					short = f
				}
			}
		}
		return short, longest
	}
	var out []byte
	xc := 0
	for i := 0; i < len(view); {
		rest := view[i:]
		short, longest := shortest(rest)
		if len(rest) < longest {
			return append(append(out, in[xc:from[i]]...), short.marker...)
		}
		var best *refForm
		for j := range forms {
			f := &forms[j]
			if bytes.HasPrefix(rest, f.text) && (best == nil || len(f.text) > len(best.text)) {
				best = f
			}
		}
		if best == nil {
			i++
			continue
		}
		out = append(append(out, in[xc:from[i]]...), best.marker...)
		i += len(best.text)
		xc = from[i-1] + 1
	}
	// The pending line break is decided as the end: a marker if it
	// begins a form.
	out = append(out, in[xc:len(in)-pend]...)
	if short, _ := shortest(in[len(in)-pend:]); pend > 0 && short != nil {
		return append(out, short.marker...)
	}
	return append(out, in[len(in)-pend:]...)
}

// pemSeed is a short PEM block of an OpenSSH key's kind, for the fuzz
// seeds: its armour and its body's magic are public (see publicLen).
const pemSeed = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----\n"

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"

// FuzzRedactCut cuts a stream at any point. The output is what
// referenceCut says, so what a cut leaves depends on no byte past the
// first 3 of a guess; it never holds a whole form.
func FuzzRedactCut(f *testing.F) {
	f.Add([]byte("token=\xfe and \xfe\xfe end"), []byte("s3cr3t\xffanother-one"), []byte{1, 2, 3}, uint16(12))
	f.Add([]byte("Authorization: \xfd\x03"), []byte("ghp_0123456789abcdef"), []byte{5}, uint16(20))
	f.Add([]byte("t=\xfe xoxb-1765-1987-pdFZKVe"), []byte("xoxb-1765-1987-pdFZKVeTuE8sk7oO"), []byte{4}, uint16(33))
	f.Add([]byte("wrapped \xfc\x83 and \xfc\x05\n"), []byte("s3cr3t-token-0123\xffanother-one"), []byte{2, 9}, uint16(40))
	// A key's public prefix, and its hex, with and without the 3 bytes
	// after it that begin a hold.
	f.Add([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5 \xfe 6233426c626e4e7a6143317a5a5874 b3BlbnNzaC1rZXktdjEAAAx"), []byte(pemSeed), []byte{7, 30}, uint16(150))
	f.Fuzz(func(t *testing.T, data, secretBlob, chunks []byte, cut uint16) {
		secrets, forms, in := fuzzInput(data, secretBlob)
		if secrets == nil {
			t.Skip("input too large to check quickly")
		}
		r, err := newRedactor(secrets)
		if err != nil {
			t.Fatal(err)
		}
		in = in[:int(cut)%(len(in)+1)]
		var out []byte
		w := r.NewStream(func(p []byte) { out = append(out, p...) })
		sizes := fuzzSizes(chunks)
		for i, rest := 0, in; len(rest) > 0; i++ {
			n := min(sizes[i%len(sizes)], len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
		}
		breaks, held := w.Pending()
		emitted := len(out)
		w.Cut()
		if cut := out[emitted:]; !bytes.HasPrefix(cut, breaks) || held != (len(cut) > len(breaks)) {
			t.Fatalf("cut after %q emitted %q; Pending said %q, held %v", in, cut, breaks, held)
		}
		checkNoForm(t, out, forms)
		if want := referenceCut(in, forms); !bytes.Equal(out, want) {
			t.Fatalf("cut after %q: got %q; want %q", in, out, want)
		}
	})
}

// TestHeldIsFirstUndecided checks held, which tests the end of a write
// by pairs of bytes, against at at every position: it returns the first
// position from its start on that at leaves undecided. The input is log
// text with the starts of forms (heads of every length, pairs of two
// heads) at random places and ends, of a key whose whole forms hold
// longer than what the pairs table tells (maxPairLongest), as far from
// the end as they hold (bigPairs), and of tokens.
func TestHeldIsFirstUndecided(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 11))
	secrets := map[string][]byte{"key": pemKey(rng, "OPENSSH PRIVATE KEY", 1218, 70), "gh": []byte(token), "pin": []byte("2024-pin")}
	r, err := newRedactor(secrets)
	if err != nil {
		t.Fatal(err)
	}
	forms := referenceForms(secrets)
	for range 3000 {
		var in []byte
		for n := rng.IntN(r.maxHold + 200); len(in) < n; {
			switch rng.IntN(4) {
			case 0:
				f := forms[rng.IntN(len(forms))].text
				in = append(in, f[:1+rng.IntN(min(len(f), 4))]...)
			case 1:
				f := forms[rng.IntN(len(forms))].text
				in = append(in, f[:rng.IntN(len(f)+1)]...)
			default:
				in = fmt.Appendf(in, "2026-01-02 id=%x n=%d ", rng.Uint32(), rng.IntN(1e6))
			}
		}
		in = in[:rng.IntN(len(in)+1)]
		first := func(from int) int {
			for s := from; s < len(in); s++ {
				if _, n := r.at(in, s, false); n == undecided {
					return s
				}
			}
			return len(in)
		}
		// From anywhere, and from just before a position held, which the
		// pair after it finds.
		for _, from := range []int{rng.IntN(len(in) + 1), max(0, first(0)-rng.IntN(4))} {
			if got, want := r.held(in, from), first(from); got != want {
				t.Fatalf("held(%q, %d) = %d; want %d", in, from, got, want)
			}
		}
	}
}

// TestHeldAtTheNearBoundary puts the head of a form of long hold (the
// armour and the first 3 bytes of a key's body) at every distance from
// the end around nearHold, where held passes from farPairs to pairs, and
// asks held from every start before it.
func TestHeldAtTheNearBoundary(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 12))
	key := pemKey(rng, "OPENSSH PRIVATE KEY", 399, 70)
	r, err := newRedactor(map[string][]byte{"key": key})
	if err != nil {
		t.Fatal(err)
	}
	head := string(key[:len("-----BEGIN OPENSSH PRIVATE KEY-----\n")+3])
	filler := strings.Repeat("x", 2*nearHold+32)
	for d := nearHold - 12; d <= nearHold+12; d++ {
		in := []byte(filler[:len(filler)-d] + head + filler[:d-len(head)])
		s := len(in) - d
		for from := max(0, s-17); from <= s; from++ {
			if got := r.held(in, from); got != s {
				t.Fatalf("the head at %d, %d from the end: held(from %d) = %d; want %d", s, d, from, got, s)
			}
		}
	}
}

// opensshKey returns an Ed25519 private key in OpenSSH format, PEM
// armoured, from seed: what every SSH target's key looks like.
func opensshKey(t testing.TB, seed byte) []byte {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)), "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// TestStreamPublicPrefixNotHeld: the bytes every OpenSSH key begins with
// (its armour, the base64 of "openssh-key-v1", and their hex and base64)
// hold a stream back only with 3 bytes more of a form, so a terminal's
// output that holds "623" (hex of the body's "b3B") or "---" is shown
// at once; what only a form's public prefix and 3 bytes more hold is
// still held.
func TestStreamPublicPrefixNotHeld(t *testing.T) {
	key := opensshKey(t, 1)
	r, err := New([]Secret{{Name: "box-key", Value: key}})
	if err != nil {
		t.Fatal(err)
	}
	armour := "-----BEGIN OPENSSH PRIVATE KEY-----\n"
	body := string(key[len(armour):])
	hexBody := hex.EncodeToString([]byte(body))
	b64 := base64.StdEncoding.EncodeToString(key)
	tests := []struct{ name, in, held string }{
		{"a pid", "bash-5.2$ echo 1623\r\n1623\r\nbash-5.2$ ", ""},
		{"another pid", "bash-5.2$ echo 1624\r\n1624\r\nbash-5.2$ ", ""},
		{"a git hash", "commit 2d2f9e0b3B\n", ""},
		{"a rule", "--- a/x\n+++ b/x\n", ""},
		{"the armour alone", "$ head -1 id\n" + armour + "$ ", ""},
		{"the body's magic", "b3BlbnNzaC1rZXktdjEA!", ""},
		{"the armour and 3 bytes of the body", "$ cat id\n" + armour + body[:3], armour + body[:3]},
		{"the body's public prefix and 3 bytes", "x " + body[:23], body[:23]},
		{"the hex of the body's public prefix and 3 bytes", "x " + hexBody[:43] + "!", hexBody[:43] + "!"},
		{"the hex of the body's public prefix", "x " + hexBody[:40] + "!", ""},
		// Its armour and the body's magic are 56 bytes, 74 characters.
		{"the key's base64, to its magic", "x " + b64[:74] + "!", ""},
		{"the key's base64, to 3 bytes past its magic", "x " + b64[:77] + "!", b64[:77] + "!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out []byte
			w := r.NewStream(func(p []byte) { out = append(out, p...) })
			w.Write([]byte(tt.in))
			_, held := w.Pending()
			if want := tt.in[:len(tt.in)-len(tt.held)]; string(out) != want || held != (strings.TrimLeft(tt.held, "\r\n") != "") {
				t.Errorf("after %q: emitted %q, held %v; want %q emitted", tt.in, out, held, want)
			}
			w.Close()
			if want := r.Redact([]byte(tt.in)); !bytes.Equal(out, want) {
				t.Errorf("closed after %q: %q; want %q", tt.in, out, want)
			}
		})
	}
}
