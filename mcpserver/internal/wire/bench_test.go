package wire

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchInput returns count newline-terminated tools/call requests of about
// size bytes each.
func benchInput(size, count int) []byte {
	var b bytes.Buffer
	for i := range count {
		head := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"emit","arguments":{"s":"`, i+1)
		tail := `"}}}`
		b.WriteString(head)
		b.WriteString(strings.Repeat("a", size-len(head)-len(tail)))
		b.WriteString(tail)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

var benchCases = []struct {
	name        string
	size, count int
}{
	{"1KiB", 1 << 10, 4096},
	{"1MiB", 1 << 20, 8},
}

// BenchmarkReader measures the framer alone, and the framer plus message
// decoding, which is what the server's reader goroutine does per frame.
func BenchmarkReader(b *testing.B) {
	for _, bc := range benchCases {
		input := benchInput(bc.size, bc.count)
		b.Run("frame/"+bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			for b.Loop() {
				fr := NewReader(bytes.NewReader(input), 4<<20, nil)
				for {
					if _, err := fr.Next(); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
		b.Run("frame+decode/"+bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			for b.Loop() {
				fr := NewReader(bytes.NewReader(input), 4<<20, nil)
				for {
					f, err := fr.Next()
					if err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					if _, err := jsonrpc.DecodeMessage(f); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkSDKIOTransport reads the same input through the go-sdk's own
// newline-delimited transport (the reader behind mcp.StdioTransport), which
// frames and decodes each message.
func BenchmarkSDKIOTransport(b *testing.B) {
	ctx := context.Background()
	for _, bc := range benchCases {
		input := benchInput(bc.size, bc.count)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(input)))
			for b.Loop() {
				tr := &mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(input)), Writer: nopWriteCloser{}}
				conn, err := tr.Connect(ctx)
				if err != nil {
					b.Fatal(err)
				}
				for n := 0; n < bc.count; n++ {
					if _, err := conn.Read(ctx); err != nil {
						b.Fatal(err)
					}
				}
				conn.Close()
			}
		})
	}
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
