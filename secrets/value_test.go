package secrets

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

const canary = "hunter2-canary-\x00\xff-é"

// verbs are the formats a stray print might use.
var verbs = []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%t", "%p", "%T", "%10s", "%-12v", "%08x", "% x", "%#x", "%.3s", "%U", "%c", "%e"}

func TestValueFormatsAsRedacted(t *testing.T) {
	v := NewValue([]byte(canary))
	for _, verb := range verbs {
		got := fmt.Sprintf(verb, v)
		want := redacted
		switch verb {
		case "%T":
			want = "secrets.Value"
		case "%p": // fmt handles %p before Format: an address, no bytes
			want = got
		}
		if got != want || leaks(got) {
			t.Errorf("Sprintf(%q): got %q; want %q", verb, got, want)
		}
	}
	if got := fmt.Sprint(v) + fmt.Sprintln(v) + v.String() + v.GoString(); strings.Contains(got, "hunter2") {
		t.Errorf("Sprint/Sprintln/String/GoString: got %q; want no value", got)
	}
}

// Where fmt cannot call Value's methods (an unexported field), it must find
// no bytes to print either.
func TestValueInStructsDoesNotLeak(t *testing.T) {
	type exported struct{ Key Value }
	type unexported struct{ key Value }
	type nested struct {
		inner unexported
		ptr   *exported
	}
	cases := []struct {
		name string
		v    any
	}{
		{"exported field", exported{NewValue([]byte(canary))}},
		{"unexported field", unexported{NewValue([]byte(canary))}},
		{"pointer to struct", &unexported{NewValue([]byte(canary))}},
		{"nested", nested{unexported{NewValue([]byte(canary))}, &exported{NewValue([]byte(canary))}}},
		{"slice", []Value{NewValue([]byte(canary))}},
		{"map", map[string]Value{"k": NewValue([]byte(canary))}},
		{"error", fmt.Errorf("wrapped: %v", NewValue([]byte(canary)))},
	}
	for _, c := range cases {
		for _, verb := range verbs {
			got := fmt.Sprintf(verb, c.v)
			if leaks(got) {
				t.Errorf("%s: Sprintf(%q) = %q; want no value", c.name, verb, got)
			}
		}
	}
}

// leaks reports whether s holds the canary in any form a formatter may
// produce: raw, quoted, hex, or as decimal bytes.
func leaks(s string) bool {
	forms := []string{"hunter2", fmt.Sprintf("%x", "hunter2"), fmt.Sprintf("%X", "hunter2"), fmt.Sprint([]byte("hunter2"))[1:20]}
	for _, f := range forms {
		if strings.Contains(s, f) {
			return true
		}
	}
	return false
}

func TestValueLogsAsRedacted(t *testing.T) {
	v := NewValue([]byte(canary))
	opts := &slog.HandlerOptions{Level: slog.LevelDebug}
	for _, h := range []struct {
		name string
		new  func(*bytes.Buffer) slog.Handler
	}{
		{"json", func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, opts) }},
		{"text", func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, opts) }},
	} {
		var buf bytes.Buffer
		log := slog.New(h.new(&buf))
		log.Debug("value", "v", v, slog.Any("any", v), slog.Group("g", "v", v))
		log.Debug("struct", "s", struct{ Key Value }{v}, "p", &v)
		log.With("w", v).Info("with")
		got := buf.String()
		if leaks(got) {
			t.Errorf("%s handler: got %q; want no value", h.name, got)
		}
		if n := strings.Count(got, redacted); n < 6 {
			t.Errorf("%s handler: got %d %q in %q; want 6", h.name, n, redacted, got)
		}
	}
}

func TestValueMarshalsAsRedacted(t *testing.T) {
	v := NewValue([]byte(canary))
	type doc struct {
		Key Value `json:"key" xml:"key"`
	}
	j, err := json.Marshal(doc{v})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(j), `{"key":"[secret]"}`; got != want {
		t.Errorf("json: got %s; want %s", got, want)
	}
	x, err := xml.Marshal(doc{v})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(x), `<doc><key>[secret]</key></doc>`; got != want {
		t.Errorf("xml: got %s; want %s", got, want)
	}
}

func TestValueReveal(t *testing.T) {
	in := []byte(canary)
	v := NewValue(in)
	in[0] = 'X'
	if got := v.Reveal(); string(got) != canary {
		t.Errorf("Reveal after changing NewValue's input: got %q; want %q", got, canary)
	}
	out := v.Reveal()
	out[0] = 'Y'
	if got := v.Reveal(); string(got) != canary {
		t.Errorf("Reveal after changing an earlier Reveal: got %q; want %q", got, canary)
	}
	if got, want := v.Len(), len(canary); got != want {
		t.Errorf("Len: got %d; want %d", got, want)
	}
	var zero Value
	if !zero.IsZero() || zero.Reveal() != nil || zero.Len() != 0 || fmt.Sprint(zero) != redacted {
		t.Errorf("zero Value: got IsZero %v, Reveal %q, Len %d, %q; want true, nil, 0, %q", zero.IsZero(), zero.Reveal(), zero.Len(), fmt.Sprint(zero), redacted)
	}
}

func TestCheckName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"web1-deploy-key", true},
		{"github.token_2", true},
		{"clé-🔑-ключ", true},
		{strings.Repeat("a", MaxNameBytes), true},
		{"", false},
		{strings.Repeat("a", MaxNameBytes+1), false},
		{"two words", false},
		{"a/b", false},
		{`a\b`, false},
		{"line\nbreak", false},
		{"tab\t", false},
		{"nbsp\u00a0", false},
		{"bad-utf8-\xff", false},
		{"esc\x1b[31m", false},
		{"bidi\u202e", false},
	}
	for _, c := range cases {
		err := CheckName(c.name)
		var ne *NameError
		if got := err == nil; got != c.ok {
			t.Errorf("CheckName(%q): got err %v; want ok %v", c.name, err, c.ok)
		} else if err != nil && !errors.As(err, &ne) {
			t.Errorf("CheckName(%q): got %T; want *NameError", c.name, err)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	cases := []struct {
		err  error
		want []string
	}{
		{&NotFoundError{"web1-key"}, []string{`secret "web1-key" is not in the keyring`, "actiongw secret set web1-key"}},
		{&NoServiceError{errors.New("DBUS_SESSION_BUS_ADDRESS is not set")}, []string{"no Secret Service", "DBUS_SESSION_BUS_ADDRESS is not set", readme}},
		{ErrLocked, []string{"locked", readme}},
	}
	for _, c := range cases {
		got := c.err.Error()
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%T: got %q; want it to contain %q", c.err, got, w)
			}
		}
		if strings.Count(got, ". ") > 0 || strings.HasSuffix(got, ".") {
			t.Errorf("%T: got %q; want one sentence without a final period", c.err, got)
		}
	}
	if !errors.Is(&NoServiceError{errors.New("x")}, ErrNoService) {
		t.Error("errors.Is(*NoServiceError, ErrNoService): got false; want true")
	}
}

// FuzzValue checks, for any bytes, that every format shows only the
// placeholder and that Reveal gives the bytes back.
func FuzzValue(f *testing.F) {
	f.Add([]byte(canary))
	f.Add([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		v := NewValue(b)
		for _, verb := range verbs {
			if verb == "%T" || verb == "%p" {
				continue
			}
			if got := fmt.Sprintf(verb, v); got != redacted {
				t.Fatalf("Sprintf(%q): got %q; want %q", verb, got, redacted)
			}
		}
		if got := v.Reveal(); !bytes.Equal(got, b) {
			t.Fatalf("Reveal: got %q; want %q", got, b)
		}
	})
}

func ExampleValue() {
	key := NewValue([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\n…"))
	fmt.Printf("%v %q %x %#v\n", key, key, key, key)
	slog.New(slog.NewTextHandler(printer{}, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	})).Info("dialing", "key", key)
	// Output:
	// [secret] [secret] [secret] [secret]
	// level=INFO msg=dialing key=[secret]
}

type printer struct{}

func (printer) Write(p []byte) (int, error) { fmt.Print(string(p)); return len(p), nil }
