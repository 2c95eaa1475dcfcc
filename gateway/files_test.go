package gateway

import (
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
		{"bad base64", SSHUploadInput{Content: str("AAEC/w"), Encoding: "base64"}, "base64", true},
		{"unknown encoding", SSHUploadInput{Content: str("78"), Encoding: "hex"}, `"utf8" or "base64"`, true},
		{"nothing", SSHUploadInput{}, "content", true},
		{"both", SSHUploadInput{Content: str("x"), FromHandle: "out-x", FromStream: "body"}, "not both", true},
		{"no from_stream", SSHUploadInput{FromHandle: "out-x"}, "from_stream", true},
		{"encoding with from_handle", SSHUploadInput{FromHandle: "out-x", FromStream: "body", Encoding: "base64"}, "encoding", true},
	} {
		b, n, err := uploadContent(&state{}, tt.in)
		switch {
		case tt.err && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v; want an error saying %q", tt.name, err, tt.want)
		case !tt.err && (err != nil || string(b) != tt.want || n != int64(len(tt.want))):
			t.Errorf("%s: %q (%d), %v; want %q", tt.name, b, n, err, tt.want)
		}
	}
}
