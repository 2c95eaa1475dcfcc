package wire

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzDecode holds Decode to the SDK's jsonrpc.DecodeMessage: on any
// frame both refuse it, or both read the same message.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,"b"]}}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`,
		`{"jsonrpc":"2.0","id":"a","result":{"x":1}}`, `{"jsonrpc":"2.0","id":3,"error":{"code":-32600,"message":"no"}}`,
		`{"jsonrpc":"2.0","id":3,"error":null}`, `{"jsonrpc":"2.0","method":""}`, `{"jsonrpc":"2.0","method":1}`,
		`{"jsonrpc":"2.0"}`, `{"jsonrpc":"1.0","id":1,"method":"x"}`, `{"JSONRPC":"2.0","id":1,"method":"x"}`,
		`{"jsonrpc":"2.0","Method":"x","id":1}`, `{"jsonrpc":"2.0","id":true,"method":"x"}`, `{"jsonrpc":"2.0","id":1.5,"method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x"} {"jsonrpc":"2.0"}`, `{"jsonrpc":"2.0","id":1,"method":"x"}garbage`,
		`{"jsonrpc":"2.0","id":1,"method":"\u0078\n"}`, `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"x"}]`, `"x"`, `null`, ``, ` `, `{`, `{"jsonrpc":"2.0","id":1,"method":"x","params":`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":[` + strings.Repeat("[", 1000) + `]}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","params":"` + strings.Repeat("[", 1001) + `"}`,
		`{"jsonrpc":"2.0","id":1,"method":"x","extra":{"a":[tru]}}`, `{"jsonrpc":"2.0","id":1,"method":"x\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		want, wantErr := jsonrpc.DecodeMessage(bytes.Clone(frame))
		got, err := Decode(frame)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%q: Decode: %v; the SDK: %v", frame, err, wantErr)
		}
		if err != nil {
			return
		}
		if !reflect.DeepEqual(normal(got), normal(want)) {
			t.Fatalf("%q: Decode read %#v; the SDK %#v", frame, got, want)
		}
	})
}

// normal is msg with empty raw values made nil, which the two decoders
// may leave either way, so that reflect.DeepEqual compares what they mean.
func normal(msg jsonrpc.Message) jsonrpc.Message {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		c := *m
		if len(c.Params) == 0 {
			c.Params = nil
		}
		return &c
	case *jsonrpc.Response:
		c := *m
		if len(c.Result) == 0 {
			c.Result = nil
		}
		return &c
	}
	return msg
}
