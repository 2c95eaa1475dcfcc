package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func TestNewRefusesShortSecret(t *testing.T) {
	_, err := newRedactor(map[string][]byte{"ok-key": []byte("long enough"), "pin": []byte("123")})
	var short *ShortSecretError
	if !errors.As(err, &short) {
		t.Fatalf("got error %v; want *ShortSecretError", err)
	}
	if short.Name != "pin" {
		t.Errorf("got name %q; want %q", short.Name, "pin")
	}
	if strings.Contains(err.Error(), "123") {
		t.Errorf("error %q contains the secret value", err)
	}
}

func TestRedactForms(t *testing.T) {
	secret := "p@ss w/rd+ü?" // differs in every encoded form
	r, err := newRedactor(map[string][]byte{"db": []byte(secret)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		in   string
	}{
		{"raw", "password=" + secret + ";"},
		{"base64 padded", "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(secret))},
		{"base64 unpadded", "x" + base64.RawStdEncoding.EncodeToString([]byte(secret)) + "y"},
		{"base64 url-safe", base64.URLEncoding.EncodeToString([]byte(secret))},
		{"query escape", "https://h/?p=" + url.QueryEscape(secret)},
		{"path escape", "/users/" + url.PathEscape(secret) + "/x"},
		{"query escape, lower-case hex", "?p=" + lowerPercentHex(url.QueryEscape(secret)) + "&q=1"},
		{"JSON", `{"password":` + string(mustJSON(secret)) + `,"user":"x"}`},
		{"hex", "0x" + hex.EncodeToString([]byte(secret)) + "00"},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte("\x00" + secret + "\n")))},
		{"base64 after a prefix", base64.StdEncoding.EncodeToString([]byte("Bearer " + secret + "\r\n"))},
		{"base64url after a prefix", base64.URLEncoding.EncodeToString([]byte("u:" + secret))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.RedactString(tt.in)
			if !strings.Contains(got, "[REDACTED:db]") {
				t.Errorf("got %q; want it to contain [REDACTED:db]", got)
			}
			for _, form := range Forms([]byte(secret)) {
				if strings.Contains(got, form) {
					t.Errorf("got %q; still contains form %q", got, form)
				}
			}
		})
	}
}

func TestRedactLeftmostLongest(t *testing.T) {
	r, err := newRedactor(map[string][]byte{
		"short": []byte("abcd"),
		"long":  []byte("abcdefgh"),
		"later": []byte("cdefxyz1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{"--abcdefgh--", "--[REDACTED:long]--"},
		{"--abcdefg--", "--[REDACTED:short]efg--"},
		{"abcdefxyz1", "[REDACTED:short]efxyz1"},
		{"abcabcd", "abc[REDACTED:short]"},
		{"nothing here", "nothing here"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := r.RedactString(tt.in); got != tt.want {
			t.Errorf("RedactString(%q) = %q; want %q", tt.in, got, tt.want)
		}
		if got := redactChunked(r, []byte(tt.in), []int{1}); string(got) != tt.want {
			t.Errorf("byte-at-a-time(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactNilAndEmptyPassThrough(t *testing.T) {
	var nilR *Redactor
	empty, err := newRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Redactor{nilR, empty} {
		if got := r.RedactString("hello"); got != "hello" {
			t.Errorf("got %q; want %q", got, "hello")
		}
		if got := redactChunked(r, []byte("hello world"), []int{3}); string(got) != "hello world" {
			t.Errorf("got %q; want %q", got, "hello world")
		}
	}
}

// TestRedactEverySplit redacts secrets of several lengths, so every stride
// of the scan is used, with the input split at every position.
func TestRedactEverySplit(t *testing.T) {
	for _, n := range []int{4, 5, 6, 7, 12, 19, 40} {
		secret := []byte(strings.Repeat("k3Y", 20)[:n])
		secrets := map[string][]byte{"k": secret}
		r, err := newRedactor(secrets)
		if err != nil {
			t.Fatal(err)
		}
		in := []byte("pre " + string(secret) + strings.Repeat(" filler", 9) + string(secret) + string(secret[:n-1]) + " " + string(secret))
		want := referenceRedact(in, referenceForms(secrets))
		if got := r.Redact(in); !bytes.Equal(got, want) {
			t.Fatalf("len %d: Redact = %q; want %q", n, got, want)
		}
		for split := 1; split < len(in); split++ {
			if got := redactChunked(r, in, []int{split, len(in)}); !bytes.Equal(got, want) {
				t.Fatalf("len %d, split at %d: got %q; want %q", n, split, got, want)
			}
		}
	}
}

// TestRedactHoldback checks that the stream holds back no more than the
// longest pattern minus one byte.
func TestRedactHoldback(t *testing.T) {
	r, err := newRedactor(map[string][]byte{"k": []byte("0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	w := r.NewStream(func(p []byte) { out = append(out, p...) })
	in := bytes.Repeat([]byte("xyz "), 100)
	written := 0
	for _, n := range []int{1, 2, 7, 40, 3, 100, 1, 1, 200} {
		w.Write(in[written : written+n])
		written += n
		if held := written - len(out); held > r.MaxHoldback() {
			t.Fatalf("after %d bytes: %d held back; want at most %d", written, held, r.MaxHoldback())
		}
	}
	w.Close()
	if !bytes.Equal(out, in[:written]) {
		t.Errorf("got %q after flush; want the input back", out)
	}
}

func redactChunked(r *Redactor, in []byte, sizes []int) []byte {
	var out []byte
	w := r.NewStream(func(p []byte) { out = append(out, p...) })
	for i := 0; len(in) > 0; i++ {
		n := min(sizes[i%len(sizes)], len(in))
		w.Write(in[:n])
		in = in[n:]
	}
	w.Close()
	return out
}

// refForm is a pattern as the reference sees it: its text and its marker,
// and whether the end rule spares it (a form of a secret of several
// lines, or of a token with a secret part).
type refForm struct {
	text, marker []byte
	noEnd        bool
}

func severalLines(v []byte) bool { return bytes.ContainsRune(bytes.TrimRight(v, "\r\n"), '\n') }

// referenceForms lists the forms of secrets in New's order: names sorted,
// each name's Forms in turn, then those of its secret part if it has one;
// a form two names share keeps the first name.
func referenceForms(secrets map[string][]byte) []refForm {
	var forms []refForm
	seen := map[string]bool{}
	add := func(name string, v []byte, noEnd bool) {
		for _, f := range Forms(v) {
			if !seen[f] {
				seen[f] = true
				forms = append(forms, refForm{[]byte(f), []byte("[REDACTED:" + name + "]"), noEnd})
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		v := secrets[name]
		part := secretPart(v)
		add(name, v, severalLines(v) || part != nil)
		if part != nil {
			add(name, part, false)
		}
	}
	return forms
}

// referenceRedact is an obviously correct leftmost-longest replacement of
// forms, with the end rule: bytes at the end of in that are a proper
// prefix of a form, at least tailMinLen of them and at least half of it,
// are replaced with the marker of the shortest such form (the first listed
// of two as long), unless a form ends there too or that form is one the
// end rule spares.
func referenceRedact(in []byte, forms []refForm) []byte {
	byFirst := map[byte][]*refForm{} // in list order: it breaks ties
	for j := range forms {
		byFirst[forms[j].text[0]] = append(byFirst[forms[j].text[0]], &forms[j])
	}
	var out []byte
	for i := 0; i < len(in); {
		rest := in[i:]
		var best, tail *refForm
		for _, f := range byFirst[in[i]] {
			switch {
			case len(f.text) > len(rest):
				if bytes.HasPrefix(f.text, rest) && len(rest) >= tailMinLen && 2*len(rest) >= len(f.text) && (tail == nil || len(f.text) < len(tail.text)) {
					tail = f
				}
			case bytes.HasPrefix(rest, f.text) && (best == nil || len(f.text) > len(best.text)):
				best = f
			}
		}
		switch {
		case tail != nil && !tail.noEnd && (best == nil || len(best.text) < len(rest)):
			return append(out, tail.marker...)
		case best != nil:
			out = append(out, best.marker...)
			i += len(best.text)
		default:
			out = append(out, in[i])
			i++
		}
	}
	return out
}

// fuzzInput turns fuzz arguments into secrets and an input. secretBlob
// holds up to 8 secrets (s0 to s7) of up to 128 bytes, split at 0xff. In
// data, 0xfe is replaced with a form of a secret, and 0xfd followed by a
// byte c with the base64 of a secret after c%7 bytes of "Bearer " and
// before "\n", at another alignment. It returns nil secrets when the input
// is too large to check quickly.
func fuzzInput(data, secretBlob []byte) (map[string][]byte, []refForm, []byte) {
	secrets := map[string][]byte{}
	var values [][]byte
	for i, s := range bytes.Split(secretBlob, []byte{0xff}) {
		if len(s) < MinSecretLen || len(s) > 128 || i >= 8 {
			continue
		}
		secrets[fmt.Sprintf("s%d", i)] = s
		values = append(values, s)
	}
	forms := referenceForms(secrets)
	var in []byte
	for i := 0; i < len(data); i++ {
		switch b := data[i]; {
		case b == 0xfe && len(forms) > 0:
			in = append(in, forms[i%len(forms)].text...)
		case b == 0xfd && len(values) > 0 && i+1 < len(data):
			i++
			c := int(data[i])
			v := append([]byte("Bearer "[:c%7]), values[c%len(values)]...)
			in = base64.StdEncoding.AppendEncode(in, append(v, '\n'))
		default:
			in = append(in, b)
		}
	}
	if len(in) > 1<<14 {
		return nil, nil, nil
	}
	return secrets, forms, in
}

// fuzzSizes turns fuzz bytes into write sizes; 0 is an empty write, and
// at least one size is not 0.
func fuzzSizes(chunks []byte) []int {
	var sizes []int
	for _, c := range chunks {
		sizes = append(sizes, int(c))
	}
	if !slices.ContainsFunc(sizes, func(n int) bool { return n > 0 }) {
		sizes = append(sizes, 1)
	}
	return sizes
}

// checkNoForm fails if out holds a whole form, or, with end set, ends with
// a proper prefix of one; forms a marker could rebuild ("[REDACTED:s1]"
// holds "ACTED") are left out.
func checkNoForm(t *testing.T, out []byte, forms []refForm, end bool) {
	t.Helper()
	markers := map[string]bool{}
	for _, f := range forms {
		markers[string(f.marker)] = true
	}
	byFirst := map[byte][]refForm{}
	for _, f := range forms {
		if bytes.ContainsAny(f.text, "[]") || markerContains(markers, f.text) {
			continue
		}
		if bytes.Contains(out, f.text) {
			t.Fatalf("output %q contains secret form %q", out, f.text)
		}
		byFirst[f.text[0]] = append(byFirst[f.text[0]], f)
	}
	for i := 0; end && i < len(out); i++ {
		for _, f := range byFirst[out[i]] {
			if len(f.text) > len(out)-i && bytes.HasPrefix(f.text, out[i:]) {
				t.Fatalf("output %q ends with %q, the start of secret form %q", out, out[i:], f.text)
			}
		}
	}
}

func FuzzRedactStream(f *testing.F) {
	f.Add([]byte("token=\xfe and \xfe\xfe end"), []byte("s3cr3t\xffanother-one"), []byte{1, 2, 3})
	f.Add([]byte("\xfe"), []byte("abcd\xffabcdef\xffbcde"), []byte{0, 1})
	f.Add(bytes.Repeat([]byte("ab\xfe"), 50), []byte("ababab\xffbabababa"), []byte{7, 0, 31})
	// Long secrets take the widest stride of the scan.
	f.Add(bytes.Repeat([]byte("log line \xfe and more text\n"), 40), []byte("0123456789abcdefghijKLMN\xffzyxwvutsrqponmlkjihgfedcba9876\xff+/+/+/+/+/+/+/+/+/+/+/+/"), []byte{13, 200, 1})
	f.Add([]byte("t=\xfe xoxb-1765-1987-pdFZKVe"), []byte("xoxb-1765-1987-pdFZKVeTuE8sk7oO"), []byte{4})
	f.Fuzz(func(t *testing.T, data, secretBlob, chunks []byte) {
		secrets, forms, in := fuzzInput(data, secretBlob)
		if secrets == nil {
			t.Skip("input too large to check quickly")
		}
		r, err := newRedactor(secrets)
		if err != nil {
			t.Fatal(err)
		}
		want := referenceRedact(in, forms)
		if got := r.Redact(in); !bytes.Equal(got, want) {
			t.Fatalf("Redact = %q; want %q", got, want)
		}
		sizes := fuzzSizes(chunks)
		got := redactChunked(r, in, sizes)
		if !bytes.Equal(got, want) {
			t.Fatalf("chunked %v = %q; want %q", sizes, got, want)
		}
		checkNoForm(t, got, forms, false)
	})
}

func markerContains(markers map[string]bool, form []byte) bool {
	for m := range markers {
		if strings.Contains(m, string(form)) {
			return true
		}
	}
	return false
}

func mustJSON(s string) []byte {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

// newRedactor builds a Redactor from secrets keyed by name.
func newRedactor(m map[string][]byte) (*Redactor, error) {
	list := make([]Secret, 0, len(m))
	for name, v := range m {
		list = append(list, Secret{Name: name, Value: v})
	}
	return New(list)
}

// TestRedactManySecrets fills the grams table beyond its smallest size:
// every secret is still found, raw and encoded, among ordinary text.
func TestRedactManySecrets(t *testing.T) {
	secrets := map[string][]byte{}
	for i := range 1000 {
		secrets[fmt.Sprintf("k%d", i)] = fmt.Appendf(nil, "tok-%08x-%08x-%04d", uint32(i)*2654435761, uint32(i)*40503, i)
	}
	r, err := newRedactor(secrets)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.grams) <= 1<<minGramWordsLog {
		t.Fatalf("grams table has %d words; want it grown past %d", len(r.grams), 1<<minGramWordsLog)
	}
	for name, v := range secrets {
		for _, in := range []string{"a " + string(v) + " b", "x" + hex.EncodeToString(v), base64.StdEncoding.EncodeToString(append([]byte("Bearer "), v...))} {
			if got := r.RedactString(in); !strings.Contains(got, "[REDACTED:"+name+"]") {
				t.Fatalf("RedactString(%q) = %q; want [REDACTED:%s] in it", in, got, name)
			}
		}
	}
}
