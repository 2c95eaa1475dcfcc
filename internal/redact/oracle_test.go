package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The property that makes the redactor no oracle: for a secret S and an
// output built from pieces of S (prefixes, suffixes, inner parts, in any
// encoding the redactor knows, split across writes and lines, ended by a
// close or a cut), what the agent sees is the same when the gateway holds
// S and when it holds any S' of its kind, as long, that shares S's
// public prefix (see publicLen: for a key, its armour and the magic its
// body begins with, which every key of its kind shares) and 3 bytes more
// (for a key, the first 3 of its body after those) and differs after:
// unless the output holds a whole form of S or of S'.
// The agent learns nothing from a guess but whether it was the whole
// secret. (How long a stream holds bytes back grows with the length of
// the secret they may begin: see form.)

// sight is what an agent sees of one output: how much of it was emitted
// after each write while the action ran, and the whole after a close and
// after a cut.
type sight struct {
	running     []int
	closed, cut string
}

// observe streams out through r, in writes of the given sizes.
func observe(r *Redactor, out []byte, writes []int) sight {
	var s sight
	for _, cut := range []bool{false, true} {
		var got []byte
		w := r.NewStream(func(p []byte) { got = append(got, p...) })
		rest := out
		for i := 0; len(rest) > 0; i++ {
			n := min(max(writes[i%len(writes)], 1), len(rest))
			w.Write(rest[:n])
			rest = rest[n:]
			if !cut {
				s.running = append(s.running, len(got))
			}
		}
		if cut {
			w.Cut()
			s.cut = string(got)
		} else {
			w.Close()
			s.closed = string(got)
		}
	}
	return s
}

// holdsWhole reports whether out holds one of forms, in its view.
func holdsWhole(out []byte, forms []string) bool {
	view, _ := refView(out)
	return slices.ContainsFunc(forms, func(f string) bool { return bytes.Contains(view, []byte(f)) })
}

// oraclePair is a redactor of a secret and one of another that shares
// its public prefix and 3 bytes more, both under the name "s".
type oraclePair struct {
	forms      []string // of both
	rs, rother *Redactor
}

func newOraclePair(t *testing.T, s, other []byte) *oraclePair {
	t.Helper()
	rs, err := New([]Secret{{Name: "s", Value: s}})
	if err != nil {
		t.Fatal(err)
	}
	ro, err := New([]Secret{{Name: "s", Value: other}})
	if err != nil {
		t.Fatal(err)
	}
	return &oraclePair{append(Forms(s), Forms(other)...), rs, ro}
}

// check compares what an agent sees of out with the gateway holding either
// secret, unless out holds a whole form of one of them.
func (p *oraclePair) check(t *testing.T, out []byte, writes []int) {
	t.Helper()
	if holdsWhole(out, p.forms) {
		return
	}
	if a, b := observe(p.rs, out, writes), observe(p.rother, out, writes); !slices.Equal(a.running, b.running) || a.closed != b.closed || a.cut != b.cut {
		t.Fatalf("output %q, writes %v: the agent sees %+v with the secret, %+v with another that shares its head", out, writes, a, b)
	}
}

// piecesOf lists outputs an agent can make from pieces of s, knowing
// them: each proper prefix and suffix, at the end of the output and
// before a line end, raw and in every encoding (base64 at the three
// alignments, wrapped or not).
func piecesOf(s []byte) [][]byte {
	var outs [][]byte
	add := func(piece []byte) {
		for _, enc := range encodedPieces(piece) {
			outs = append(outs, append([]byte("echo: "), enc...), append(append([]byte("x="), enc...), '\n'))
		}
	}
	for k := 1; k < len(s); k++ {
		add(s[:k])
		add(s[k:])
		// Pieces with other bytes between them: a guess and what it
		// would go on with.
		outs = append(outs, append(append(slices.Clone(s[:k]), 0x01), s[k:]...))
	}
	return outs
}

// encodedPieces returns piece raw and in the encodings Forms knows, and in
// base64 after 0 to 2 bytes, wrapped at 4 and 76 columns.
func encodedPieces(piece []byte) [][]byte {
	var out [][]byte
	q, _ := json.Marshal(string(piece))
	out = append(out, piece, q, []byte(url.QueryEscape(string(piece))), []byte(hex.EncodeToString(piece)))
	for a := range 3 {
		e := base64.StdEncoding.EncodeToString(append(make([]byte, a), piece...))
		out = append(out, []byte(e), []byte(wrapLines(e, 4, "\n")), []byte(wrapLines(e, 76, "\r\n")))
	}
	return out
}

// keyPair returns a key in PEM armour, its body wrapped at width, whose
// DER begins with der0 and goes on with random bytes to n, and another of
// the same kind and size whose DER shares der0 and 3 bytes more (so its
// body shares the base64 of der0 and the 3 characters after it: for a DER
// SEQUENCE header, derSequence and the 3 after it) and differs after.
func keyPair(rng *rand.Rand, kind string, der0 []byte, n, width int) (key, other []byte) {
	der := make([]byte, n)
	for i := range der {
		der[i] = byte(rng.Uint32())
	}
	copy(der, der0)
	der2 := slices.Clone(der)
	for i := len(der0) + 3; i < n; i++ {
		der2[i] = der[i] ^ byte(1+rng.IntN(255))
	}
	return armour(kind, der, width), armour(kind, der2, width)
}

func armour(kind string, der []byte, width int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "-----BEGIN %s-----\n", kind)
	b.WriteString(wrapLines(base64.StdEncoding.EncodeToString(der), width, "\n"))
	fmt.Fprintf(&b, "-----END %s-----\n", kind)
	return b.Bytes()
}

// TestNoOracle checks the property for secrets of every shape the old end
// rule had to treat apart, and for keys, with the pieces an agent guessing
// them would print, at every split of the output into two writes.
func TestNoOracle(t *testing.T) {
	enc := base64.RawURLEncoding
	jwt := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." +
		enc.EncodeToString([]byte(`{"sub":"gw@clients","exp":1764553600}`)) + ".dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
	differ := func(s string) string {
		b := []byte(s)
		for i := publicLen(b) + headLen; i < len(b); i++ {
			b[i] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[(strings.IndexByte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", b[i])+7)%62]
		}
		return string(b)
	}
	rng := rand.New(rand.NewPCG(36, 1))
	type pair struct{ name, s, other string }
	pairs := []pair{
		{"a token with a public prefix", token, differ(token)},
		{"a JWT", jwt, differ(jwt)},
		{"a Slack token", "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy", differ("xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy")},
		{"Basic user:password", "svc-monitoring-readonly:hunter2hunter2", differ("svc-monitoring-readonly:hunter2hunter2")},
		{"a passphrase", "correct horse battery staple", "corrupt hoarse battle stable"},
		{"a password ending in a line end", "Tr0ub4dor&3\n", "Tr0ub4dor&4\n"},
		// The first 3 bytes end inside a UTF-8 sequence: JSON writes it
		// as itself or as \ufffd escapes, by whether the 4th byte goes on
		// with it.
		{"a password whose 3rd byte begins a character", "\xd6\xa5\xd6\xa5-k\xc3\xb6nig", "\xd6\xa5\xd6\xd5-k\xc3\xb6nig"},
		{"a password that begins with an emoji", "\xf0\x9f\x98\x80-secret", "\xf0\x9f\x98!-secret"},
		{"a password whose 3rd byte begins U+2028", "x\xe2\x80\xa8-secret", "x\xe2\x80\xa7-secret"},
		// A line break among the first 3 bytes: the view leaves it out
		// when a base64 character follows.
		{"a secret whose 3rd byte is a line break", "ab\ncdefgh", "ab\n!defgh"},
		{"a secret whose 2nd byte is a line break", "a\nbcdefgh", "a\nbZdefgh"},
		{"a secret whose 3rd byte is a CR", "ab\r\ncdefg", "ab\r!cdefg"},
	}
	for _, kind := range []struct {
		kind     string
		der0     []byte
		n, width int
	}{
		{"OPENSSH PRIVATE KEY", nil, 399, 70},
		{"PRIVATE KEY", nil, 121, 64},
		// An RSA key's DER: a SEQUENCE of 300 bytes, whose base64 begins
		// with derSequence.
		{"RSA PRIVATE KEY", []byte{0x30, 0x82, 0x01, 0x28}, 304, 64},
	} {
		key, other := keyPair(rng, kind.kind, kind.der0, kind.n, kind.width)
		pairs = append(pairs, pair{"a " + kind.kind, string(key), string(other)})
	}
	// Two real keys share far more than their public prefix (the key
	// type, the length of the public key) and part at the public key.
	pairs = append(pairs, pair{"an OpenSSH Ed25519 key", string(opensshKey(t, 1)), string(opensshKey(t, 2))})
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			outs := piecesOf([]byte(p.s))
			if strings.Contains(p.s, "-----") {
				// Too many pieces of a key to try at every split: its
				// lines, and every tenth prefix and suffix.
				outs = nil
				for k := 1; k < len(p.s); k += 10 {
					outs = append(outs, encodedPieces([]byte(p.s[:k]))...)
					outs = append(outs, encodedPieces([]byte(p.s[k:]))...)
				}
				for l := range strings.Lines(p.s) {
					outs = append(outs, encodedPieces([]byte(l))...)
				}
			}
			op := newOraclePair(t, []byte(p.s), []byte(p.other))
			for i, out := range outs {
				op.check(t, out, []int{len(out)})
				// Split in two writes: at a few places of every output,
				// and at every place of some.
				for split := 1; split < len(out); split++ {
					if i%17 == 0 && len(out) < 200 || split < 4 || len(out)-split < 4 || split == len(out)/2 {
						op.check(t, out, []int{split, len(out)})
					}
				}
			}
		})
	}
}

// TestPartsAreNoPatterns says what the property costs: a part of a
// secret, which an agent can have a host that stores the secret print
// (`head -c -1`, `sed -n 3p`), is not replaced, since a redactor that
// replaced it would tell a right guess of it from a wrong one. A secret
// stored on a host the agent runs commands on is the agent's to read in
// pieces anyway; the redactor catches it whole, in every form Forms
// lists, however it is wrapped.
func TestPartsAreNoPatterns(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 2))
	key, _ := keyPair(rng, "OPENSSH PRIVATE KEY", nil, 399, 70)
	r, err := newRedactor(map[string][]byte{"gh": []byte(token), "key": key})
	if err != nil {
		t.Fatal(err)
	}
	line := strings.Split(string(key), "\n")[2] + "\n"
	for _, tt := range []struct{ name, in string }{
		{"head -c -1 of a token", token[:len(token)-1]},
		{"a token less its first byte", token[1:]},
		{"sed -n 3p of a key", line},
	} {
		if got := r.RedactString(tt.in); got != tt.in {
			t.Errorf("%s: RedactString(%q) = %q; want it as it is", tt.name, tt.in, got)
		}
	}
}

// FuzzNoOracle checks the property for a one-line secret and outputs built
// from its pieces as the fuzzer directs. ops is read a byte at a time:
// the low 3 bits pick what comes next (a prefix, a suffix, an inner part,
// a filler byte, a line break, a write boundary, a whole form of the
// secret but one byte), the rest its length and encoding. mutate makes
// the other secret from the first one's bytes after its public prefix
// and 3 more.
func FuzzNoOracle(f *testing.F) {
	f.Add([]byte(token), []byte{7, 1}, []byte{0x18, 0x21, 0x05, 0x4a})
	f.Add([]byte("hunter2hunter2"), []byte{1}, []byte{0x08, 0x10, 0x20, 0x06})
	f.Add([]byte("svc-ro:pa55-w0rd-0f-d00m"), []byte{3, 9}, []byte{0x90, 0x31, 0x02, 0x7b, 0x05})
	// The other's 4th byte ends the UTF-8 sequence its 3rd begins.
	f.Add([]byte("\xd6\xa5\xd6\xa5"), []byte("A"), []byte("p"))
	f.Fuzz(func(t *testing.T, secret, mutate, ops []byte) {
		if len(secret) < MinSecretLen || len(secret) > 64 || bytes.ContainsAny(secret, "\r\n") || len(ops) > 64 {
			t.Skip("a one-line secret of 4 to 64 bytes, and a short output")
		}
		other := slices.Clone(secret)
		changed := false
		for i := publicLen(secret) + headLen; i < len(other); i++ {
			if len(mutate) > 0 && mutate[i%len(mutate)] != 0 {
				other[i] ^= mutate[i%len(mutate)]
				changed = true
			}
		}
		if !changed || bytes.ContainsAny(other, "\r\n") {
			t.Skip("the other secret must differ after its head, on one line")
		}
		if publicLen(other) != publicLen(secret) {
			// "ghpc…" made "ghp_…", a GitHub token: its kind, which its
			// prefix says, is public (see publicLen).
			t.Skip("the other secret must be of the same kind")
		}
		var out []byte
		writes := []int{}
		last := 0
		for _, op := range ops {
			n := int(op>>3)%len(secret) + 1
			var piece []byte
			switch op & 7 {
			case 0:
				piece = secret[:min(n, len(secret)-1)]
			case 1:
				piece = secret[max(len(secret)-n, 1):]
			case 2:
				piece = secret[min(n, len(secret)-1) : len(secret)-1]
			case 3:
				out = append(out, " !xA="[n%5])
				continue
			case 4:
				out = append(out, "\n\r\n"[:1+n%2]...)
				continue
			case 5:
				writes = append(writes, len(out)-last)
				last = len(out)
				continue
			default:
				piece = secret[:len(secret)-1]
			}
			encs := encodedPieces(piece)
			out = append(out, encs[int(op>>3)%len(encs)]...)
		}
		writes = append(writes, len(out)-last+1)
		newOraclePair(t, secret, other).check(t, out, writes)
	})
}
