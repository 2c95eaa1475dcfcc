package wire

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	segjson "github.com/segmentio/encoding/json"
)

// maxDepth is the nesting the SDK's decoder allows (its internal/json).
const maxDepth = 1000

// message is a JSON-RPC message as the SDK reads it off the wire
// (jsonrpc2's wireDecode): method kept raw, so that a "method" present
// with the empty string is told from none.
type message struct {
	VersionTag string          `json:"jsonrpc"`
	ID         any             `json:"id,omitempty"`
	Method     json.RawMessage `json:"method"`
	Params     json.RawMessage `json:"params,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      *jsonrpc.Error  `json:"error,omitempty"`
}

// Decode is jsonrpc.DecodeMessage without its garbage. The SDK decodes
// a frame twice, the message and then its method's string, each time
// through a json.Decoder that allocates a 32 KiB buffer: 64 KiB for every
// message, some 15% of all serve allocated under the soak's load. Decode
// parses the frame in place with the same library and flags
// (segmentio/encoding/json, field names matched exactly) under the same
// nesting limit, and like the SDK's decoder reads the first value of the
// frame. FuzzDecode holds it to jsonrpc.DecodeMessage.
func Decode(frame []byte) (jsonrpc.Message, error) {
	if err := checkDepth(frame); err != nil {
		return nil, err
	}
	var m message
	if _, err := segjson.Parse(frame, &m, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	if m.VersionTag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", m.VersionTag, "2.0")
	}
	id, err := jsonrpc.MakeID(m.ID)
	if err != nil {
		return nil, err
	}
	if len(m.Method) > 0 {
		var method string
		if _, err := segjson.Parse(m.Method, &method, segjson.DontMatchCaseInsensitiveStructFields); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{Method: method, ID: id, Params: m.Params}, nil
	}
	if !id.IsValid() {
		return nil, errInvalidRequest
	}
	resp := &jsonrpc.Response{ID: id, Result: m.Result}
	if m.Error != nil { // not a typed nil in the error interface
		resp.Error = m.Error
	}
	return resp, nil
}

// errInvalidRequest is the SDK's answer to a message with neither a
// method nor an id (jsonrpc2.ErrInvalidRequest).
var errInvalidRequest = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}

// checkDepth refuses what nests deeper than maxDepth, counting brackets
// outside strings as the SDK does.
func checkDepth(data []byte) error {
	depth, inString, escaped := 0, false, false
	for _, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > maxDepth {
				return fmt.Errorf("json: exceeded maximum nesting depth of %d", maxDepth)
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return nil
}
