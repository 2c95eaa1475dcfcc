package gateway

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"testing"
)

// The transfers themselves are tested against a real sshd through a real
// serve (cmd/actiongw/files_test.go); these are the checks of a call
// before anything is dialled.

func TestParseMode(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint32
		err  bool
	}{
		{"", 0o644, false},
		{"0640", 0o640, false},
		{"600", 0o600, false},
		{"0777", 0o777, false},
		{"4755", 0, true},
		{"0999", 0, true},
		{"rw-r--r--", 0, true},
		{"-1", 0, true},
	} {
		m, err := parseMode(tt.in)
		if (err != nil) != tt.err || uint32(m) != tt.want {
			t.Errorf("parseMode(%q) = %04o, %v; want %04o, error %v", tt.in, m, err, tt.want, tt.err)
		}
	}
}

func TestUploadContent(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tt := range []struct {
		name string
		in   SSHUploadInput
		want string // the content, or a word of the error
		err  bool
	}{
		{"utf8 by default", SSHUploadInput{Content: str("héllo\n")}, "héllo\n", false},
		{"empty file", SSHUploadInput{Content: str("")}, "", false},
		{"base64", SSHUploadInput{Content: str("AAEC/w=="), Encoding: "base64"}, "\x00\x01\x02\xff", false},
		{"base64 with one =", SSHUploadInput{Content: str("AAEC"), Encoding: "base64"}, "\x00\x01\x02", false},
		{"base64 in lines", SSHUploadInput{Content: str("AAEC\r\n/w==\n"), Encoding: "base64"}, "\x00\x01\x02\xff", false},
		{"bad base64", SSHUploadInput{Content: str("AAEC/w"), Encoding: "base64"}, "base64", true},
		{"padding inside", SSHUploadInput{Content: str("AA==AAAA"), Encoding: "base64"}, "illegal base64 data at input byte 4", true},
		{"unknown encoding", SSHUploadInput{Content: str("78"), Encoding: "hex"}, `"utf8" or "base64"`, true},
		{"nothing", SSHUploadInput{}, "content", true},
		{"both", SSHUploadInput{Content: str("x"), FromHandle: "out-x", FromStream: "body"}, "not both", true},
		{"no from_stream", SSHUploadInput{FromHandle: "out-x"}, "from_stream", true},
		{"encoding with from_handle", SSHUploadInput{FromHandle: "out-x", FromStream: "body", Encoding: "base64"}, "encoding", true},
	} {
		r, n, err := uploadContent(&state{}, tt.in)
		var b []byte
		if err == nil {
			if b, err = io.ReadAll(r); err != nil {
				t.Errorf("%s: reading the content: %v", tt.name, err)
			}
		}
		switch {
		case tt.err && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v; want an error saying %q", tt.name, err, tt.want)
		case !tt.err && (err != nil || string(b) != tt.want || n != int64(len(tt.want))):
			t.Errorf("%s: %q (%d), %v; want %q", tt.name, b, n, err, tt.want)
		}
	}
}

// FuzzUploadBase64: base64 content sent as it is decoded gives the bytes,
// the size and the refusal, with its message, that decoding it whole gives.
func FuzzUploadBase64(f *testing.F) {
	for _, s := range []string{"", "AAEC/w==", "AAE=", "AA==AAAA", "A===", "AAEC\n/w==", "AAEC/w", "AB!C", "////", "AAB="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, wantErr := base64.StdEncoding.DecodeString(s)
		r, n, err := uploadContent(&state{}, SSHUploadInput{Content: &s, Encoding: "base64"})
		if wantErr != nil {
			if err == nil || !strings.HasSuffix(err.Error(), ": "+wantErr.Error()) {
				t.Fatalf("%q: got %v; want the refusal %v", s, err, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: got %v; want %x", s, err, want)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, want) || n != int64(len(want)) {
			t.Fatalf("%q: got %x (%d), %v; want %x (%d)", s, got, n, err, want, len(want))
		}
	})
}

// TestUploadBase64Large: a large plain content is streamed (nothing decoded
// ahead), and one bad byte deep inside it is refused, with its offset.
func TestUploadBase64Large(t *testing.T) {
	content := make([]byte, 3<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>9)
	}
	encoded := base64.StdEncoding.EncodeToString(content)
	r, n, err := uploadContent(&state{}, SSHUploadInput{Content: &encoded, Encoding: "base64"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*bytes.Reader); ok {
		t.Error("got the content decoded ahead; want it decoded as it is read")
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, content) || n != int64(len(content)) {
		t.Errorf("got %d bytes (size %d), %v; want the %d sent", len(got), n, err, len(content))
	}
	bad := encoded[:len(encoded)/2] + "!" + encoded[len(encoded)/2+1:]
	_, _, err = uploadContent(&state{}, SSHUploadInput{Content: &bad, Encoding: "base64"})
	want := fmt.Sprintf("content is not valid base64 (standard alphabet, with padding): illegal base64 data at input byte %d", len(encoded)/2)
	if err == nil || err.Error() != want {
		t.Errorf("got %v; want %q", err, want)
	}
}
