//go:build testtools

package mcpserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/mcpserver/internal/payload"
)

// The emit tool exists only in builds with the testtools tag: it lets the
// transport tests produce any output, at any pace, without SSH.
func init() { toolSets = append(toolSets, addEmitTool) }

const (
	maxEmitBytes     = 256 << 20
	progressInterval = 250 * time.Millisecond
)

type emitIn struct {
	Bytes   int    `json:"bytes,omitempty" jsonschema:"payload size in bytes"`
	Kind    string `json:"kind,omitempty" jsonschema:"ascii (default), quotes, multibyte, unbroken or control"`
	Chunks  int    `json:"chunks,omitempty" jsonschema:"produce the payload in this many chunks (default 1)"`
	DelayMS int    `json:"delay_ms,omitempty" jsonschema:"pause before each chunk, in milliseconds"`
	Echo    string `json:"echo,omitempty" jsonschema:"text to return instead of a generated payload"`
	Stray   string `json:"stray,omitempty" jsonschema:"text written straight to os.Stdout first"`
	Tag     string `json:"tag,omitempty" jsonschema:"a name for this call in the server log"`
}

type emitOut struct {
	Bytes  int    `json:"bytes"`
	Kind   string `json:"kind"`
	SHA256 string `json:"sha256"`
}

func addEmitTool(s *mcp.Server, env *toolEnv) {
	addTool(s, &mcp.Tool{
		Name:        "emit",
		Description: "Test tool: return a generated payload as text, optionally slowly and in chunks with progress.",
	}, env.emit)
}

func (env *toolEnv) emit(ctx context.Context, req *mcp.CallToolRequest, in emitIn) (*mcp.CallToolResult, emitOut, error) {
	if in.Kind == "" {
		in.Kind = "ascii"
	}
	if in.Bytes < 0 || in.Bytes > maxEmitBytes {
		return nil, emitOut{}, fmt.Errorf("bytes must be between 0 and %d", maxEmitBytes)
	}
	chunks := max(in.Chunks, 1)
	data, err := payload.Generate(in.Kind, in.Bytes)
	if err != nil {
		return nil, emitOut{}, err
	}
	if in.Echo != "" {
		data, in.Bytes, in.Kind = []byte(in.Echo), len(in.Echo), "echo"
	}
	log := env.log.With("tool", "emit", "tag", in.Tag)
	log.Info("emit started", "bytes", in.Bytes, "kind", in.Kind, "chunks", chunks)
	if in.Stray != "" {
		fmt.Fprint(os.Stdout, in.Stray)
	}
	token := req.Params.GetProgressToken()
	var lastProgress time.Time
	for i := range chunks {
		if in.DelayMS > 0 {
			select {
			case <-ctx.Done():
				log.Info("emit cancelled", "chunk", i, "cause", context.Cause(ctx))
				return nil, emitOut{}, context.Cause(ctx)
			case <-time.After(time.Duration(in.DelayMS) * time.Millisecond):
			}
		}
		if ctx.Err() != nil {
			log.Info("emit cancelled", "chunk", i, "cause", context.Cause(ctx))
			return nil, emitOut{}, context.Cause(ctx)
		}
		done := in.Bytes * (i + 1) / chunks
		// At most a few progress notifications a second, whatever the pace.
		if token != nil && (time.Since(lastProgress) >= progressInterval || i == chunks-1) {
			lastProgress = time.Now()
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(done),
				Total:         float64(in.Bytes),
				Message:       fmt.Sprintf("chunk %d of %d", i+1, chunks),
			})
			if err != nil {
				log.Debug("progress not sent", "error", err)
			}
		}
	}
	sum := sha256.Sum256(data)
	out := emitOut{Bytes: len(data), Kind: in.Kind, SHA256: hex.EncodeToString(sum[:])}
	log.Info("emit finished", "bytes", len(data))
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(data)}}}, out, nil
}
