package wire

import (
	"encoding/json"
	"slices"
)

// ErrorFrame returns a JSON-RPC error response, followed by '\n': the
// answer to a frame that could not be taken. id is the JSON text of the
// frame's request id (from RequestID or an OversizeError), written as it
// came, so that the sender matches it to its call whatever its type or
// size; nil, or text that is not one JSON value, writes null: the id
// could not be read.
func ErrorFrame(id json.RawMessage, code int64, message string, data any) []byte {
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	e, err := json.Marshal(wireError{code, message, data})
	if err != nil {
		// data is always a plain struct or map built by this module.
		panic("wire: encoding error frame: " + err.Error())
	}
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	return slices.Concat([]byte(`{"jsonrpc":"2.0","id":`), id, []byte(`,"error":`), e, []byte("}\n"))
}
