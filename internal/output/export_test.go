package output

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/internal/redact"
)

func TestCopyFinished(t *testing.T) {
	for _, tc := range []struct {
		name       string
		head, tail int64
		data       string
		want       string
		gaps       string
	}{
		{"whole", 100, 100, "0123456789", "0123456789", ""},
		{"head and tail", 4, 3, "0123456789abc", "0123abc", "[4 10)"},
		{"ring wrapped", 2, 5, strings.Repeat("x", 20) + "vwxyz", "xxvwxyz", "[2 20)"},
		{"empty", 4, 4, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sp, err := OpenSpool(dir, SpoolOptions{RetainHeadBytes: tc.head, RetainTailBytes: tc.tail})
			if err != nil {
				t.Fatal(err)
			}
			red, _ := redact.New(nil)
			a := sp.Begin("ssh_session_start", "box")
			c := a.Capture("recording", red, Limits{})
			for i := 0; i < len(tc.data); i += 3 {
				c.Write([]byte(tc.data[i:min(i+3, len(tc.data))]))
			}
			a.Finish()
			var out bytes.Buffer
			var gaps []string
			err = CopyFinished(dir, a.Handle(), "recording", &out, func(r ByteRange) { gaps = append(gaps, fmt.Sprintf("[%d %d)", r.Start, r.End)) })
			if err != nil || out.String() != tc.want || strings.Join(gaps, " ") != tc.gaps {
				t.Errorf("got %q gaps %q, %v; want %q gaps %q", out.String(), gaps, err, tc.want, tc.gaps)
			}
			if err := CopyFinished(dir, a.Handle(), "stdout", &out, nil); !errors.Is(err, ErrUnknownStream) {
				t.Errorf("an unknown stream: %v", err)
			}
		})
	}
	for _, h := range []string{"../etc", "out_" + strings.Repeat("a", 26)} {
		if err := CopyFinished(t.TempDir(), h, "recording", &bytes.Buffer{}, nil); err == nil {
			t.Errorf("handle %q: no error", h)
		}
	}
}
