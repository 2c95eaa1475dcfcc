package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
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
			checkNoForm(t, out, forms, true)
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
		// A whole a is held too until b's 11 bytes have arrived: whether b
		// goes on from it would tell how far the bytes match b.
		{"x abcdefgh ", "x [REDACTED:a]"},
		{"x abcdefgh abc", "x [REDACTED:a] [REDACTED:a]"},
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

// TestRedactEnd checks the end rule: a cut-off pattern at the end of the
// input is replaced when it is at least 8 bytes and half the pattern.
func TestRedactEnd(t *testing.T) {
	r, err := newRedactor(map[string][]byte{"gh": []byte(token), "pin": []byte("pin-2468-x")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"head -c -1", token[:len(token)-1], "[REDACTED:gh]"},
		{"half", "t=" + token[:len(token)/2], "t=[REDACTED:gh]"},
		{"less than half", "t=" + token[:len(token)/2-1], "t=" + token[:len(token)/2-1]},
		{"8 bytes of a 10-byte secret", "n=pin-2468", "n=[REDACTED:pin]"},
		{"7 bytes", "n=pin-246", "n=pin-246"},
		{"not at the end", token[:len(token)-1] + "\n", token[:len(token)-1] + "\n"},
		{"whole secret", "n=pin-2468-x", "n=[REDACTED:pin]"},
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
	r, err := newRedactor(map[string][]byte{"gh": []byte(token), "key": pemKey(rng, "PRIVATE KEY", 1218, 64)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, held string }{
		{"plain line\n", ""},
		{"almost " + token[:10], token[:10]},
		{"x g", "g"},
		{"-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----\n"},
		// Held by their first bytes, however they go on (see
		// TestStreamHoldIsNoOracle).
		{"-----BEGIN PRIVATE KEY-----\nno\n", "-----BEGIN PRIVATE KEY-----\nno\n"},
		{"almost " + token[:3] + "!", token[:3] + "!"},
		// Held only until as many bytes as the longest pattern they could
		// begin have arrived (the token's, not the key's): then decided.
		{"not " + token[:3] + strings.Repeat("!", len(token)-3), ""},
		{"not " + token[:3] + strings.Repeat("!", len(token)-4), token[:3] + strings.Repeat("!", len(token)-4)},
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

// TestStreamHoldIsNoOracle: an agent that has its own bytes echoed back
// guesses a secret one character at a time, knowing its start. What the
// stream emits while it runs, and what a cut leaves, must be the same for
// a right guess and a wrong one; else a few hundred echoes give the
// whole secret.
func TestStreamHoldIsNoOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 10))
	key := pemKey(rng, "OPENSSH PRIVATE KEY", 399, 70)
	secrets := map[string][]byte{"gh": []byte(token), "key": key}
	r, err := newRedactor(secrets)
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]string{
		"raw":       token,
		"hex":       hex.EncodeToString([]byte(token)),
		"base64":    base64.RawStdEncoding.EncodeToString([]byte(token)),
		"key line":  strings.Split(string(key), "\n")[2],
		"whole key": string(key),
		// Its first 64 and 76 characters are whole patterns (the lines of
		// base64 -w 64 and -w 76) that an agent can know without the key:
		// the armour and the first bytes of the body, which are the same
		// in every key of a kind ("openssh-key-v1", the cipher "none").
		// Knowing a whole pattern is no licence to learn what follows it.
		"base64 of the key": base64.RawStdEncoding.EncodeToString(key),
	}
	run := func(in string) (running, cut string) {
		var out []byte
		w := r.NewStream(func(p []byte) { out = append(out, p...) })
		w.Write([]byte(in))
		running = string(out)
		w.Cut()
		return running, string(out)
	}
	for name, form := range forms {
		// The first 3 bytes are what the hold may depend on. Each right
		// guess is a proper prefix of a form: until a guess completes one,
		// nothing may tell it from a wrong one.
		for k := 3; k < min(len(form)-1, 100); k++ {
			right := form[:k+1]
			wrong := form[:k] + "\x01"
			rightRunning, rightCut := run("echo: " + right)
			wrongRunning, wrongCut := run("echo: " + wrong)
			if len(rightRunning) != len(wrongRunning) {
				t.Fatalf("%s: %d known bytes and a guess: %d bytes emitted for the right guess, %d for a wrong one",
					name, k, len(rightRunning), len(wrongRunning))
			}
			if rightCut != wrongCut {
				t.Fatalf("%s: %d known bytes and a guess, cut: got %q for the right guess, %q for a wrong one",
					name, k, rightCut, wrongCut)
			}
		}
	}
}

// referenceHold is what a stream that was written in, and not yet
// closed, has emitted, and the marker a cut puts in place of the rest
// (nil when nothing is held). It scans as referenceRedact does, without
// the end rule, and stops at the first position whose first bytes, up to
// 3, begin a form, when fewer bytes follow it than the longest form they
// begin, however those bytes go on. The marker is that of the shortest
// form they begin (the first listed of two as long).
func referenceHold(in []byte, forms []refForm) (emitted, marker []byte) {
	for i := 0; i < len(in); {
		rest := in[i:]
		head := rest[:min(3, len(rest))]
		var shortest, best *refForm
		longest := 0
		for j := range forms {
			f := &forms[j]
			if bytes.HasPrefix(f.text, head) {
				longest = max(longest, len(f.text))
				if shortest == nil || len(f.text) < len(shortest.text) {
					shortest = f
				}
			}
			if bytes.HasPrefix(rest, f.text) && (best == nil || len(f.text) > len(best.text)) {
				best = f
			}
		}
		switch {
		case len(rest) < longest:
			return emitted, shortest.marker
		case best != nil:
			emitted = append(emitted, best.marker...)
			i += len(best.text)
		default:
			emitted = append(emitted, in[i])
			i++
		}
	}
	return emitted, nil
}

// FuzzRedactCut cuts a stream at any point. The output is what
// referenceHold says, so what a cut leaves depends on no byte past the
// first 3 of a guess; it never ends with the start of a form or holds a
// whole one.
func FuzzRedactCut(f *testing.F) {
	f.Add([]byte("token=\xfe and \xfe\xfe end"), []byte("s3cr3t\xffanother-one"), []byte{1, 2, 3}, uint16(12))
	f.Add([]byte("Authorization: \xfd\x03"), []byte("ghp_0123456789abcdef"), []byte{5}, uint16(20))
	// A token of ids and a secret (see secretPart), cut in its ids and in its secret.
	f.Add([]byte("t=\xfe xoxb-1765-1987-pdFZKVe"), []byte("xoxb-1765-1987-pdFZKVeTuE8sk7oO"), []byte{4}, uint16(33))
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
		w.Cut()
		checkNoForm(t, out, forms, true)
		emitted, marker := referenceHold(in, forms)
		if want := append(emitted, marker...); !bytes.Equal(out, want) {
			t.Fatalf("cut after %q: got %q; want %q", in, out, want)
		}
	})
}

// TestKnownStartHasNoEndRule: the "user:password" of Basic auth begins
// with the user name, which the agent knows. The end rule must not count
// it, or the name and one guessed character at the end of the output are
// replaced exactly when the guess is right; the password's own end rule
// still applies.
func TestKnownStartHasNoEndRule(t *testing.T) {
	const user, password = "svc-monitoring-readonly", "hunter2hunter2"
	r, err := New([]Secret{{Name: "pw", Value: []byte(password)}, {Name: "pw", Value: []byte(user + ":" + password), KnownStart: true}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"name and a right guess", user + ":h", user + ":h"},
		{"name and a wrong guess", user + ":x", user + ":x"},
		{"name and half the password", user + ":" + password[:8], user + ":[REDACTED:pw]"},
		{"whole", "a=" + user + ":" + password, "a=[REDACTED:pw]"},
		{"whole, base64", base64.RawStdEncoding.EncodeToString([]byte(user + ":" + password)), "[REDACTED:pw]"},
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

// TestJWTHasEndRuleOnlyOnItsSignature: a JWT (an OAuth2 access token, a
// service account's token) begins with a header and claims the agent can
// know or guess, often more than half of the token. The end rule must not
// count them, or they and one guessed character at the end of the output
// are replaced exactly when the guess is the signature's first; the
// signature's own end rule still applies.
func TestJWTHasEndRuleOnlyOnItsSignature(t *testing.T) {
	enc := base64.RawURLEncoding
	known := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(`{"iss":"https://idp.example/","sub":"gw@clients","aud":"https://api.example/","iat":1764550000,"exp":1764553600}`)) + "."
	const sig = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	r, err := New([]Secret{{Name: "at", Value: []byte(known + sig)}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"claims and a right guess", known + sig[:1], known + sig[:1]},
		{"claims and a wrong guess", known + "A", known + "A"},
		{"claims and half the signature", known + sig[:22], known + "[REDACTED:at]"},
		{"whole", "a=" + known + sig + ";", "a=[REDACTED:at];"},
		{"signature alone, less its last character", "sig " + sig[:len(sig)-1], "sig [REDACTED:at]"},
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

// TestIDsThenSecretHasEndRuleOnlyOnItsSecret: a Slack token is a tag and
// ids the agent can know (they are in API answers), then the secret, and
// the known part is more than half of it. As with a JWT, the end rule
// applies to the secret part alone; a passphrase of words keeps the end
// rule on the whole of it.
func TestIDsThenSecretHasEndRuleOnlyOnItsSecret(t *testing.T) {
	const known, secret = "xoxb-17653672481-19874698323-", "pdFZKVeTuE8sk7oOcBrzbqgy"
	const words = "correct-horse-battery-staple"
	r, err := New([]Secret{{Name: "slack", Value: []byte(known + secret)}, {Name: "phrase", Value: []byte(words)}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, in, want string }{
		{"ids and a right guess", known + secret[:3], known + secret[:3]},
		{"ids and a wrong guess", known + "pdA", known + "pdA"},
		{"ids and half the secret", known + secret[:12], known + "[REDACTED:slack]"},
		{"whole", "t=" + known + secret + ";", "t=[REDACTED:slack];"},
		{"secret alone, less its last character", "s " + secret[:len(secret)-1], "s [REDACTED:slack]"},
		{"passphrase, more than half", "p " + words[:15], "p [REDACTED:phrase]"},
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

// TestHeldIsFirstUndecided checks held, which tests the end of a write
// by pairs of bytes, against at at every position: it returns the first
// position from its start on that at leaves undecided. The input is log
// text with the starts of forms (heads of every length, pairs of two
// heads) at random places and ends, of a key whose whole forms are
// longer than what the pairs table tells (maxPairLongest) and of tokens.
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
		for n := rng.IntN(r.maxLen + 200); len(in) < n; {
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

// TestIDsThenSecretNeedsALongSecret: a password shaped like a token of
// ids ("admin-2024-Welcome123") is no such token: its "ids" are not
// public, and its short last part, alone under the end rule (8 bytes at
// least), would let a cut output show all of it but 3 characters. It
// keeps the end rule on the whole of it.
func TestIDsThenSecretNeedsALongSecret(t *testing.T) {
	const password = "admin-2024-Welcome123"
	r, err := New([]Secret{{Name: "db", Value: []byte(password)}})
	if err != nil {
		t.Fatal(err)
	}
	in := "p=" + password[:len(password)-3]
	if got := string(r.Redact([]byte(in))); got != "p=[REDACTED:db]" {
		t.Errorf("Redact(%q) = %q; want the cut password redacted", in, got)
	}
}
