//go:build linux

package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/gateway"
)

// TestServeUploadInline sends large inline uploads as raw frames, in the
// shapes a hostile or careless client may write, and checks that the file
// holds exactly what a JSON decoder reads from the frame: the transport
// lifts a large content out of the frame before the SDK decodes it
// (mcpserver/lift.go), and whether it does or not must never show. Among
// them: a content that names the placeholder the transport writes, and
// frames whose content is named twice, once with an escape.
func TestServeUploadInline(t *testing.T) {
	s := startFiles(t, "max_frame_bytes = 16777216")
	bin := make([]byte, 300<<10)
	for i := range bin {
		bin[i] = byte(i*13 + i>>8)
	}
	b64 := base64.StdEncoding.EncodeToString(bin)
	text := strings.Repeat("line ünïcode\t\"quoted\" <&>\n", 8000)
	quoted := func(s string) string { return fmt.Sprintf("%q", s) } // Go's quoting is JSON for these
	id := int64(1 << 40)
	send := func(t *testing.T, name, args string) gateway.SSHUploadOutput {
		t.Helper()
		id++
		path := s.allowed(name)
		frame := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"target":"files","path":%q,"overwrite":true,%s}}}`, id, path, args)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		p, err := s.client.SendFrame(ctx, id, []byte(frame))
		if err != nil {
			t.Fatal(err)
		}
		r, err := p.WaitTool(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return decode[gateway.SSHUploadOutput](t, r)
	}
	lifted := func() int64 {
		return decode[struct {
			Transport struct {
				Lifted int64 `json:"arguments_lifted"`
			} `json:"transport"`
		}](t, s.call(t, "health", map[string]any{})).Transport.Lifted
	}
	cases := []struct {
		name, args string
		lifted     bool
		want       []byte
	}{
		{"base64", `"encoding":"base64","content":"` + b64 + `"`, true, bin},
		{"text with escapes", `"content":` + quoted(text), false, []byte(text)},
		{"text without escapes", `"content":"` + strings.Repeat("plain ünïcode text ", 20000) + `"`, true, []byte(strings.Repeat("plain ünïcode text ", 20000))},
		{"the placeholder itself, small", `"content":"actiongw-lifted"`, false, []byte("actiongw-lifted")},
		{"the placeholder itself, in a large frame", `"content":"actiongw-lifted"` + strings.Repeat(" ", 200<<10), true, []byte("actiongw-lifted")},
		{"content twice", `"encoding":"base64","content":"` + b64 + `","content":"QUJD"`, false, []byte("ABC")},
		{"content twice, once escaped", `"encoding":"base64","content":"` + b64 + `","\u0063ontent":"QUJD"`, false, []byte("ABC")},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := fmt.Sprintf("inline-%d", i)
			before := lifted()
			out := send(t, name, c.args)
			if got := lifted() - before; got != map[bool]int64{false: 0, true: 1}[c.lifted] {
				t.Errorf("arguments lifted: %d; want lifted %v", got, c.lifted)
			}
			if out.Status != "ok" || out.SHA256 != hexSHA(c.want) {
				t.Fatalf("upload: %+v; want ok with sha256 %s", out, hexSHA(c.want))
			}
			if got := readLocal(t, s.allowed(name)); string(got) != string(c.want) {
				t.Errorf("the file holds %d bytes that differ from the %d a decoder reads from the frame", len(got), len(c.want))
			}
		})
	}
}
