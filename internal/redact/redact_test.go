package redact

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := r.RedactString(tt.in)
			if !strings.Contains(got, "[REDACTED:db]") {
				t.Errorf("got %q; want it to contain [REDACTED:db]", got)
			}
			for _, form := range secretForms([]byte(secret)) {
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
		r, err := newRedactor(map[string][]byte{"k": secret})
		if err != nil {
			t.Fatal(err)
		}
		in := []byte("pre " + string(secret) + strings.Repeat(" filler", 9) + string(secret) + string(secret[:n-1]) + " " + string(secret))
		want := referenceRedact(in, map[string]string{string(secret): "[REDACTED:k]"})
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

// referenceRedact is an obviously correct leftmost-longest replacement.
func referenceRedact(in []byte, forms map[string]string) []byte {
	var out []byte
	for i := 0; i < len(in); {
		best := ""
		for f := range forms {
			if len(f) > len(best) && bytes.HasPrefix(in[i:], []byte(f)) {
				best = f
			}
		}
		if best == "" {
			out = append(out, in[i])
			i++
			continue
		}
		out = append(out, forms[best]...)
		i += len(best)
	}
	return out
}

func FuzzRedactStream(f *testing.F) {
	f.Add([]byte("token=\xfe and \xfe\xfe end"), []byte("s3cr3t\xffanother-one"), []byte{1, 2, 3})
	f.Add([]byte("\xfe"), []byte("abcd\xffabcdef\xffbcde"), []byte{0, 1})
	f.Add(bytes.Repeat([]byte("ab\xfe"), 50), []byte("ababab\xffbabababa"), []byte{7, 0, 31})
	// Long secrets take the widest stride of the scan.
	f.Add(bytes.Repeat([]byte("log line \xfe and more text\n"), 40), []byte("0123456789abcdefghijKLMN\xffzyxwvutsrqponmlkjihgfedcba9876\xff+/+/+/+/+/+/+/+/+/+/+/+/"), []byte{13, 200, 1})
	f.Fuzz(func(t *testing.T, data, secretBlob, chunks []byte) {
		secrets := map[string][]byte{}
		forms := map[string]string{} // every form of every secret -> marker
		var inject []string          // forms spliced in where data has 0xfe
		names := map[string]string{} // form -> owning name, first name wins
		for i, s := range bytes.Split(secretBlob, []byte{0xff}) {
			if len(s) < MinSecretLen || len(s) > 64 || i >= 8 {
				continue
			}
			name := fmt.Sprintf("s%d", i)
			secrets[name] = s
		}
		r, err := newRedactor(secrets)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 8; i++ {
			name := fmt.Sprintf("s%d", i)
			s, ok := secrets[name]
			if !ok {
				continue
			}
			for _, form := range secretForms(s) {
				if _, dup := names[form]; !dup {
					names[form] = name
					forms[form] = "[REDACTED:" + name + "]"
					inject = append(inject, form)
				}
			}
		}
		var in []byte
		for i, b := range data {
			if b == 0xfe && len(inject) > 0 {
				in = append(in, inject[i%len(inject)]...)
				continue
			}
			in = append(in, b)
		}
		if len(in) > 1<<16 {
			t.Skip("input too large to check quickly")
		}
		sizes := []int{}
		for _, c := range chunks {
			sizes = append(sizes, int(c))
		}
		if len(sizes) == 0 || slicesAllZero(sizes) {
			sizes = append(sizes, 1)
		}

		want := referenceRedact(in, forms)
		if got := r.Redact(in); !bytes.Equal(got, want) {
			t.Fatalf("Redact = %q; want %q", got, want)
		}
		got := redactChunked(r, in, sizes)
		if !bytes.Equal(got, want) {
			t.Fatalf("chunked %v = %q; want %q", sizes, got, want)
		}
		// A form that overlaps the marker text could be rebuilt by it
		// ("[REDACTED:s1]" contains "ACTED"); every other form must be gone.
		for form := range forms {
			if strings.ContainsAny(form, "[]") || markerContains(forms, form) {
				continue
			}
			if bytes.Contains(got, []byte(form)) {
				t.Fatalf("output %q contains secret form %q", got, form)
			}
		}
	})
}

func slicesAllZero(s []int) bool {
	for _, v := range s {
		if v != 0 {
			return false
		}
	}
	return true
}

func markerContains(forms map[string]string, form string) bool {
	for _, marker := range forms {
		if strings.Contains(marker, form) {
			return true
		}
	}
	return false
}

// newRedactor builds a Redactor from secrets keyed by name.
func newRedactor(m map[string][]byte) (*Redactor, error) {
	list := make([]Secret, 0, len(m))
	for name, v := range m {
		list = append(list, Secret{Name: name, Value: v})
	}
	return New(list)
}
