package mcpserver

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/mcpserver/internal/wire"
)

// A large string argument is lifted out of its frame before the SDK sees
// the frame: a tools/call is decoded some five times over (the message by
// wire.Decode, its params and their _meta twice by the SDK, the arguments
// against the schema and into the tool's input by addTool; before those
// two, by the SDK, eight), which for an upload's 7 MB of base64 content
// cost 13 times the transfer itself. The reader
// takes the value out once, puts a placeholder in its place, and hands
// the value to the handler beside the request, in the request's Extra,
// which only a transport sets: no frame can make a call look lifted.
// The handler puts the value back into the decoded input, so the tool
// sees the arguments exactly as sent.

// liftable names, by tool, the string argument that may be lifted.
var liftable = map[string]string{"ssh_upload": "content"}

// liftArgs are the arguments liftable names, each once.
var liftArgs = slices.Compact(slices.Sorted(maps.Values(liftable)))

// liftMin is the smallest frame whose argument is lifted; below it the
// SDK's decoding costs little.
const liftMin = 64 << 10

// liftedHeader is the key under which a lifted value rides in the
// request's Extra.Header.
const liftedHeader = "Actiongw-Lifted-Argument"

// placeholder stands in the frame for a lifted value. It need not name
// the value: restore puts the value back only beside a placeholder the
// transport wrote, and callDigest adds the value itself.
const placeholder = "actiongw-lifted"

// lift takes the liftable argument out of frame when frame is a large
// tools/call of a tool in liftable whose argument is a string that
// decodes to its own bytes (no escape, valid UTF-8), and the path to it
// is unambiguous (wire.Members). It returns the frame with placeholder in
// the value's place, and the value; or frame itself and no value. When
// the frame is owned (the caller's for good, wire.Reader.Owned), the
// value is a string over its bytes, not a copy: for an upload's 7 MB of
// content the copy took some 3 ms a call, and the collector ran for it.
func lift(frame []byte, owned bool) (small []byte, value string, ok bool) {
	if len(frame) < liftMin {
		return frame, "", false
	}
	m, ok := wire.Members(frame, []string{"method", "params"}, []string{"name", "arguments"}, liftArgs)
	if !ok || !m[0][1].Found() || string(frame[m[0][0].Start:m[0][0].End]) != `"tools/call"` || !m[1][0].Found() || !m[1][1].Found() {
		return frame, "", false
	}
	name := frame[m[1][0].Start:m[1][0].End]
	arg := liftable[strings.Trim(string(name), `"`)]
	if arg == "" || len(name) < 2 || bytes.IndexByte(name, '\\') >= 0 {
		return frame, "", false
	}
	v := m[2][slices.Index(liftArgs, arg)]
	if !v.Found() || frame[v.Start] != '"' {
		return frame, "", false
	}
	text := frame[v.Start+1 : v.End-1]
	if bytes.IndexByte(text, '\\') >= 0 || !utf8.Valid(text) {
		return frame, "", false
	}
	at := v.Start // the value's opening quote
	small = make([]byte, 0, len(frame)-len(text)+len(placeholder))
	small = append(small, frame[:at+1]...)
	small = append(small, placeholder...)
	small = append(small, frame[at+1+len(text):]...)
	if owned {
		return small, unsafe.String(unsafe.SliceData(text), len(text)), true
	}
	return small, string(text), true
}

// carry puts a lifted value beside msg, for restore.
func carry(msg jsonrpc.Message, value string) {
	if req, ok := msg.(*jsonrpc.Request); ok {
		req.Extra = &mcp.RequestExtra{Header: http.Header{liftedHeader: {value}}}
	}
}

// liftedValue is the value the transport lifted out of req, if it did.
func liftedValue(req *mcp.CallToolRequest) (string, bool) {
	if req.Extra == nil || len(req.Extra.Header[liftedHeader]) != 1 {
		return "", false
	}
	return req.Extra.Header[liftedHeader][0], true
}

// errLiftedMoved is a call whose decoded arguments no longer hold the
// placeholder where the value was lifted from: a frame that named the
// argument in a way the lifter did not see (an escaped duplicate name).
var errLiftedMoved = errors.New("the call's arguments could not be read unambiguously: give each argument once, its name written without escapes")

// restorer returns the function that puts the lifted value of tool's
// liftable argument back into an In, or nil when tool has none. The
// argument must be a *string field of In; anything else is a mistake in
// liftable, found when the tool is registered.
func restorer[In any](tool string) func(*mcp.CallToolRequest, *In) error {
	arg := liftable[tool]
	if arg == "" {
		return nil
	}
	t := reflect.TypeFor[In]()
	field := -1
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name == arg {
			field = i
		}
	}
	if field < 0 || t.Field(field).Type != reflect.TypeFor[*string]() {
		panic(fmt.Sprintf("liftable: %s has no *string argument %q", tool, arg))
	}
	return func(req *mcp.CallToolRequest, in *In) error {
		value, ok := liftedValue(req)
		if !ok {
			return nil
		}
		f := reflect.ValueOf(in).Elem().Field(field)
		if f.IsNil() || *f.Interface().(*string) != placeholder {
			return errLiftedMoved
		}
		f.Set(reflect.ValueOf(&value))
		return nil
	}
}
