package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// hostile has every byte class an encoder treats apart: quote, backslash,
// slash, HTML specials, a control character, a tab, non-ASCII in and
// beyond the BMP, space and plus.
const hostile = "pa\"ss\\wo/rd<&>\x01\tü😀 +"

// TestFormsCoverEncoders checks Forms against encoders other than its own:
// Go's, and the outputs of Python, PHP, Jackson and JavaScript written out.
func TestFormsCoverEncoders(t *testing.T) {
	marshal, err := json.Marshal(hostile)
	if err != nil {
		t.Fatal(err)
	}
	var noHTML bytes.Buffer
	enc := json.NewEncoder(&noHTML)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(hostile); err != nil {
		t.Fatal(err)
	}
	unquote := func(b []byte) string { return string(bytes.TrimSuffix(bytes.TrimSpace(b)[1:], []byte(`"`))) }
	tests := []struct{ name, form string }{
		{"raw", hostile},
		{"json.Marshal", unquote(marshal)},
		{"json.Encoder without HTML escaping", unquote(noHTML.Bytes())},
		{"Python json.dumps", `pa\"ss\\wo/rd<&>\u0001\t\u00fc\ud83d\ude00 +`},
		{"Python json.dumps ensure_ascii=False", `pa\"ss\\wo/rd<&>\u0001\tü😀 +`},
		{"PHP json_encode", `pa\"ss\\wo\/rd<&>\u0001\t\u00fc\ud83d\ude00 +`},
		{"PHP json_encode JSON_UNESCAPED_UNICODE", `pa\"ss\\wo\/rd<&>\u0001\tü😀 +`},
		{"Jackson ESCAPE_NON_ASCII", `pa\"ss\\wo/rd<&>\u0001\t\u00FC\uD83D\uDE00 +`},
		{"url.QueryEscape", url.QueryEscape(hostile)},
		{"url.PathEscape", url.PathEscape(hostile)},
		{"Python quote(safe='')", "pa%22ss%5Cwo%2Frd%3C%26%3E%01%09%C3%BC%F0%9F%98%80%20%2B"},
		{"Python quote", "pa%22ss%5Cwo/rd%3C%26%3E%01%09%C3%BC%F0%9F%98%80%20%2B"},
		{"Python quote, lower-case hex", "pa%22ss%5cwo/rd%3c%26%3e%01%09%c3%bc%f0%9f%98%80%20%2b"},
		{"query escape, lower-case hex", "pa%22ss%5cwo%2frd%3c%26%3e%01%09%c3%bc%f0%9f%98%80+%2b"},
		{"path escape, lower-case hex", strings.ToLower(url.PathEscape(hostile)[:2]) + strings.ToLower(url.PathEscape(hostile)[2:])},
		{"hex", hex.EncodeToString([]byte(hostile))},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(hostile)))},
		{"base64", base64.RawStdEncoding.EncodeToString([]byte(hostile))},
		{"base64url", base64.RawURLEncoding.EncodeToString([]byte(hostile))},
	}
	forms := Forms([]byte(hostile))
	for _, tt := range tests {
		if !slices.Contains(forms, tt.form) {
			t.Errorf("%s: Forms lacks %q", tt.name, tt.form)
		}
	}
	for _, f := range forms {
		if len(f) < MinSecretLen {
			t.Errorf("form %q is shorter than MinSecretLen", f)
		}
	}
	if got := Forms([]byte("abc")); got != nil {
		t.Errorf("Forms of a 3-byte value = %q; want nil", got)
	}
}

// TestLineEndsOnly: a value of line ends alone (a keyring item stored
// from an empty line, or a refresh token an OAuth2 server rotated to)
// has nothing left once its line ends are trimmed. New must not panic
// on it, which would stop serve at the load or the token refresh.
func TestLineEndsOnly(t *testing.T) {
	for _, v := range []string{"\r\r\r\r", "\n\n\n\n", "\r\n\r\n"} {
		r, err := New([]Secret{{Name: "s", Value: []byte(v)}})
		if err != nil {
			t.Fatalf("New(%q): %v", v, err)
		}
		if got := r.RedactString("a" + v + "b"); got != "a[REDACTED:s]b" {
			t.Errorf("RedactString of %q inside text = %q; want it redacted", v, got)
		}
	}
}

// TestRedactBase64Alignments encodes the secret after 0 to 6 bytes and
// before 0 to 2, in both alphabets, padded or not: every character that
// only the secret decides is replaced, and only those.
func TestRedactBase64Alignments(t *testing.T) {
	for _, secret := range []string{"tok", "tok3", "tok3n", "t0k3n-abcdef", "t0k3n-abcdefg", "t0k3n-abcdefgh", hostile} {
		if len(secret) < MinSecretLen {
			continue
		}
		r, err := newRedactor(map[string][]byte{"k": []byte(secret)})
		if err != nil {
			t.Fatal(err)
		}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			for pre := range 7 {
				for _, post := range []string{"", "\n", "xy", "xyz"} {
					in := "Bearer "[:pre] + secret + post
					e := enc.EncodeToString([]byte(in))
					// The secret's bits are [8*pre, 8*(pre+len)); a character
					// holds bits [6c, 6c+6).
					from, to := (8*pre+5)/6, 8*(pre+len(secret))/6
					// The encoding of the secret alone ends in a character
					// with zero bits after the secret's; the data may have
					// it too.
					if alone := strings.TrimRight(enc.EncodeToString([]byte(secret)), "="); pre%3 == 0 && strings.HasPrefix(e[from:], alone) {
						to = from + len(alone)
					}
					want := e[:from] + "[REDACTED:k]" + e[to:]
					if got := r.RedactString(e); got != want {
						t.Errorf("%q, base64 of %q: got %q; want %q", secret, in, got, want)
					}
				}
			}
		}
	}
}

// pemKey returns a private key in PEM armour with its body wrapped at
// width: 64 for PKCS#8 and PKCS#1, 70 for OpenSSH.
func pemKey(rng *rand.Rand, kind string, n, width int) []byte {
	der := make([]byte, n)
	for i := range der {
		der[i] = byte(rng.Uint32())
	}
	if width == 64 {
		return pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "-----BEGIN %s-----\n", kind)
	body := base64.StdEncoding.EncodeToString(der)
	for len(body) > 0 {
		line := body[:min(width, len(body))]
		body = body[len(line):]
		b.WriteString(line + "\n")
	}
	fmt.Fprintf(&b, "-----END %s-----\n", kind)
	return b.Bytes()
}

// TestRedactPEMKey plays what an agent can have a host holding a copy of
// the key print: the whole of it, its body alone, in another line end,
// wrapped anew, encoded. A part of it (a line: `sed -n 3p`) is no pattern
// of its own (see Forms, and TestPartsAreNoPatterns).
func TestRedactPEMKey(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, key := range [][]byte{
		pemKey(rng, "OPENSSH PRIVATE KEY", 399, 70),
		pemKey(rng, "PRIVATE KEY", 1218, 64),
	} {
		r, err := newRedactor(map[string][]byte{"key": key})
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(key), "\n"), "\n")
		crlf := strings.ReplaceAll(string(key), "\n", "\r\n")
		body := strings.Join(lines[1:len(lines)-1], "\n") + "\n"
		wrap := func(s string, w int) string {
			var b strings.Builder
			for len(s) > 0 {
				l := s[:min(w, len(s))]
				s = s[len(l):]
				b.WriteString(l + "\n")
			}
			return b.String()
		}
		whole, _ := json.Marshal(string(key))
		tests := []struct{ name, out string }{
			{"cat", string(key)},
			{"head -c -1", string(key[:len(key)-1])},
			{"unix2dos", crlf},
			{"unix2dos | head -c -2", crlf[:len(crlf)-2]},
			{"tr -d '\\n'", strings.ReplaceAll(string(key), "\n", "")},
			{"grep -v -- -----", body},
			{"grep -v -- ----- | tr -d '\\n'", strings.ReplaceAll(body, "\n", "")},
			{"grep -v -- ----- | tr -d '\\n' | fold -w 50", wrap(strings.ReplaceAll(body, "\n", ""), 50)},
			{"grep -v -- ----- | tr -d '\\n' | fold -w 4", wrap(strings.ReplaceAll(body, "\n", ""), 4)},
			{"grep -v -- ----- | base64", wrap(base64.StdEncoding.EncodeToString([]byte(body)), 76)},
			{"jq -Rs .", string(whole)},
			{"base64", wrap(base64.StdEncoding.EncodeToString(key), 76)},
			{"base64 -w 7", wrap(base64.StdEncoding.EncodeToString(key), 7)},
			{"tar c | base64", wrap(base64.StdEncoding.EncodeToString(append([]byte("id_key\x00\x00\x00 0000600 "), key...)), 76)},
			{"xxd -p", wrap(hex.EncodeToString(key), 60)},
			{"base64 -w0", base64.StdEncoding.EncodeToString(key)},
			{"openssl base64", wrap(base64.StdEncoding.EncodeToString(key), 64)},
			{"unix2dos | base64 -w0", base64.StdEncoding.EncodeToString([]byte(crlf))},
			{"echo x; cat | base64 -w0", base64.StdEncoding.EncodeToString(append([]byte("x\n"), key...))},
			{"xxd -p | tr -d '\\n'", hex.EncodeToString(key)},
		}
		// No 16 characters of the body lines (but the last, shorter one),
		// or of the key's encodings, are left.
		var clear []string
		for _, l := range lines[1 : len(lines)-2] {
			clear = append(clear, l)
		}
		for _, k := range []string{string(key), crlf} {
			for a := range 3 {
				clear = append(clear, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("x", a) + k))[4:])
			}
			clear = append(clear, hex.EncodeToString([]byte(k)), string(whole[1:len(whole)-1]))
		}
		// The armour is public, raw or encoded.
		var public []string
		for _, l := range []string{lines[0], lines[len(lines)-1]} {
			public = append(public, l)
			for a := range 3 {
				public = append(public, base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\n", a)+l+"\n")))
			}
		}
		windows := map[string]bool{}
		for _, c := range clear {
			for i := 0; i+16 <= len(c); i++ {
				w := c[i : i+16]
				windows[w] = !slices.ContainsFunc(public, func(p string) bool { return strings.Contains(p, w) })
			}
		}
		for _, tt := range tests {
			got := r.RedactString(tt.out)
			for i := 0; i+16 <= len(got); i++ {
				if windows[got[i:i+16]] {
					t.Errorf("%s: got %q; holds %q of the key", tt.name, got, got[i:i+16])
					break
				}
			}
			if !strings.Contains(got, "[REDACTED:key]") {
				t.Errorf("%s: got %q; want a marker", tt.name, got)
			}
		}
		for _, l := range []string{lines[0], lines[len(lines)-1]} {
			if got := r.RedactString(l + "\n"); got != l+"\n" {
				t.Errorf("armour line %q became %q; want it kept", l, got)
			}
		}
	}
}

// TestFormHeads checks the heads of some forms (see form): a secret with
// no public prefix is held by its first 3 bytes; a provider's token by its
// prefix and 3 bytes more; a key by its public prefix (its armour and the
// magic or DER header its body begins with) and 3 bytes more, in every form, so that no form of it is held by bytes that every
// key of its kind begins with alone.
func TestFormHeads(t *testing.T) {
	key := opensshKey(t, 3)
	armour := len("-----BEGIN OPENSSH PRIVATE KEY-----\n")
	body := key[armour:]
	rsa := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: append([]byte{0x30, 0x82, 0x01, 0x28}, bytes.Repeat([]byte{7}, 296)...)})
	rsaArmour := len("-----BEGIN RSA PRIVATE KEY-----\n")
	const slack = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy"
	heads := map[string]int{}
	for _, v := range [][]byte{[]byte(token), []byte(hostile), key, rsa, []byte(slack), []byte("ghpX0123456789abcdef")} {
		for _, f := range forms(v) {
			heads[f.text] = f.head
		}
	}
	tests := []struct {
		name, text string
		head       int
	}{
		{"a token", token, len("ghp_") + headLen},
		{"a token's hex", hex.EncodeToString([]byte(token)), 2*len("ghp_") + headLen},
		{"a Slack token's upper-case hex", strings.ToUpper(hex.EncodeToString([]byte(slack))), 2*len("xoxb-") + headLen},
		{"a Slack token's base64", base64.RawStdEncoding.EncodeToString([]byte(slack)), len("xoxb-")*8/6 + headLen},
		{"a token without a provider's prefix", "ghpX0123456789abcdef", headLen},
		{"an RSA key", string(bytes.TrimRight(rsa, "\n")), rsaArmour + len(derSequence) + headLen},
		{"a password's JSON", string(mustJSON(hostile)[1 : len(mustJSON(hostile))-1]), headLen},
		{"a key", string(bytes.TrimRight(key, "\n")), armour + len(opensshMagic) + headLen},
		{"a key's body", string(bytes.ReplaceAll(bytes.TrimRight(body[:bytes.Index(body, []byte("-----"))], "\n"), []byte("\n"), nil)), len(opensshMagic) + headLen},
		{"a key's hex", hex.EncodeToString(bytes.TrimRight(key, "\n")), 2*(armour+len(opensshMagic)) + headLen},
		{"a key's base64", base64.RawStdEncoding.EncodeToString(bytes.TrimRight(key, "\n")), (armour+len(opensshMagic))*8/6 + headLen},
		{"a key's JSON", strings.Trim(string(mustJSON(string(bytes.TrimRight(key, "\n")))), `"`), armour + 1 + len(opensshMagic) + headLen},
	}
	for _, tt := range tests {
		// As the redactor matches it: without its base64 lines' breaks.
		text := string(normalize([]byte(tt.text), false))
		if got, ok := heads[text]; !ok || got != tt.head {
			t.Errorf("%s: head %d (a form: %v); want %d", tt.name, got, ok, tt.head)
		}
	}
	for _, f := range forms(key) {
		if f.head <= headLen {
			t.Errorf("the key's form %.40q… has a head of %d bytes; want its public prefix in it", f.text, f.head)
		}
	}
}
