package wire

import "encoding/json"

// ErrorFrame returns a JSON-RPC error response with a null id, followed by
// '\n': the answer to a frame whose id could not be known.
func ErrorFrame(code int64, message string, data any) []byte {
	type wireError struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}
	b, err := json.Marshal(struct {
		JSONRPC string    `json:"jsonrpc"`
		ID      any       `json:"id"`
		Error   wireError `json:"error"`
	}{"2.0", nil, wireError{code, message, data}})
	if err != nil {
		// data is always a plain struct or map built by this module.
		panic("wire: encoding error frame: " + err.Error())
	}
	return append(b, '\n')
}
