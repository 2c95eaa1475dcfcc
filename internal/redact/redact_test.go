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

// refForm is a pattern as the reference sees it: its text, its marker,
// its hold and its head (see form).
type refForm struct {
	text, marker []byte
	hold, head   int
}

// referenceForms lists the forms of secrets in New's order: names sorted,
// each name's Forms in turn; a form two names share keeps the first name.
func referenceForms(secrets map[string][]byte) []refForm {
	var refs []refForm
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(secrets)) {
		for _, f := range forms(secrets[name]) {
			if !seen[f.text] {
				seen[f.text] = true
				refs = append(refs, refForm{[]byte(f.text), []byte("[REDACTED:" + name + "]"), f.hold, f.head})
			}
		}
	}
	return refs
}

// refView is the view of join.go written out byte by byte: in without each
// line break ("\n" or "\r\n") that ends a line of base64 characters only
// and has another after it, and for each byte of the view the index in in
// it came from.
func refView(in []byte) (view []byte, from []int) {
	b64 := func(c byte) bool { return strings.IndexByte(base64Alphabet, c) >= 0 }
	out := make([]bool, len(in))
	lineStart := 0
	for i, c := range in {
		if c != '\n' {
			continue
		}
		s := i
		if s > lineStart && in[s-1] == '\r' {
			s--
		}
		line := in[lineStart:s]
		if len(line) > 0 && i+1 < len(in) && b64(in[i+1]) && !slices.ContainsFunc(line, func(c byte) bool { return !b64(c) }) {
			for j := s; j <= i; j++ {
				out[j] = true
			}
		}
		lineStart = i + 1
	}
	for i, c := range in {
		if !out[i] {
			view = append(view, c)
			from = append(from, i)
		}
	}
	return view, from
}

// referenceRedact is an obviously correct leftmost-longest replacement of
// forms in the view of in: a match replaces the bytes of in from its first
// byte to its last, with the line breaks between them.
func referenceRedact(in []byte, forms []refForm) []byte {
	view, from := refView(in)
	var out []byte
	xc := 0
	for i := 0; i < len(view); {
		var best *refForm
		for j := range forms {
			f := &forms[j]
			if bytes.HasPrefix(view[i:], f.text) && (best == nil || len(f.text) > len(best.text)) {
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
	return append(out, in[xc:]...)
}

// fuzzInput turns fuzz arguments into secrets and an input. secretBlob
// holds up to 8 secrets (s0 to s7) of up to 128 bytes, split at 0xff. In
// data, 0xfe is replaced with a form of a secret, and 0xfd followed by a
// byte c with the base64 of a secret after c%7 bytes of "Bearer " and
// before "\n", at another alignment; 0xfc followed by c does the same,
// wrapped at 1 to 64 columns with LF or (c >= 128) CRLF. It returns nil
// secrets when the input is too large to check quickly.
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
		case (b == 0xfd || b == 0xfc) && len(values) > 0 && i+1 < len(data):
			i++
			c := int(data[i])
			v := append([]byte("Bearer "[:c%7]), values[c%len(values)]...)
			e := base64.StdEncoding.EncodeToString(append(v, '\n'))
			if b == 0xfc {
				e = wrapLines(e, 1+c%64, []string{"\n", "\r\n"}[c/128])
			}
			in = append(in, e...)
		default:
			in = append(in, b)
		}
	}
	if len(in) > 1<<14 {
		return nil, nil, nil
	}
	return secrets, forms, in
}

// wrapLines breaks s into lines of width characters, each ended by eol.
func wrapLines(s string, width int, eol string) string {
	var b strings.Builder
	for len(s) > 0 {
		l := s[:min(width, len(s))]
		s = s[len(l):]
		b.WriteString(l + eol)
	}
	return b.String()
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

// checkNoForm fails if out holds a whole form in its view; forms a marker
// could rebuild ("[REDACTED:s1]" holds "ACTED") are left out.
func checkNoForm(t *testing.T, out []byte, forms []refForm) {
	t.Helper()
	markers := map[string]bool{}
	for _, f := range forms {
		markers[string(f.marker)] = true
	}
	view, _ := refView(out)
	for _, f := range forms {
		if bytes.ContainsAny(f.text, "[]") || markerContains(markers, f.text) {
			continue
		}
		if bytes.Contains(view, f.text) {
			t.Fatalf("output %q contains secret form %q", out, f.text)
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
	f.Add([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5 \xfe 6233426c626e4e7a \xfc\x10"), []byte(pemSeed), []byte{5, 40})
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
		checkNoForm(t, got, forms)
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
