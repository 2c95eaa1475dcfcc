package mcpserver

import (
	"bytes"
	"encoding/base64"
	"io"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actiongw/actiongw/mcpserver/internal/wire"
)

// pipeReader reads at most 64 KiB at a time, as a pipe does.
type pipeReader struct{ r io.Reader }

func (p pipeReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), 64<<10)]) }

// BenchmarkUploadFrame is what serve's reader does with an upload of
// 5 MiB inline, followed by a small call: framing, lifting, decoding.
func BenchmarkUploadFrame(b *testing.B) {
	content := make([]byte, 5<<20)
	for i := range content {
		content[i] = byte(i*7 + i>>9)
	}
	encoded := base64.StdEncoding.EncodeToString(content)
	input := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"target":"files","path":"/x","content":"` + encoded + `","encoding":"base64","overwrite":true}}}` + "\n" +
		`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"ssh_download","arguments":{"target":"files","path":"/x"}}}` + "\n")
	b.SetBytes(int64(len(input)))
	b.ReportAllocs()
	for b.Loop() {
		fr := wire.NewReader(pipeReader{bytes.NewReader(input)}, 16<<20, nil)
		for {
			frame, err := fr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			small, value, lifted := lift(frame, fr.Owned())
			if _, err := jsonrpc.DecodeMessage(small); err != nil {
				b.Fatal(err)
			}
			if lifted {
				if _, err := base64.StdEncoding.DecodeString(value); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}
