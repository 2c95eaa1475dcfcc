package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// nested is n arrays, one in the other.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

func TestRequestID(t *testing.T) {
	deep := nested(20000) // deeper than encoding/json (10000) and the SDK (1000) decode
	tests := []struct {
		name  string
		frame string
		want  string // "" wants no id
		whole bool
	}{
		{"number", `{"jsonrpc":"2.0","id":7,"method":"ping"}`, `7`, true},
		{"string", `{"jsonrpc":"2.0","id":"call-7","method":"ping"}`, `"call-7"`, true},
		{"string with escapes", `{"id":"a\"b\\\u00e9"}`, `"a\"b\\\u00e9"`, true},
		{"large number, as written", `{"id":123456789012345678901234567890}`, `123456789012345678901234567890`, true},
		{"negative with exponent", `{"id":-1.5e+3}`, `-1.5e+3`, true},
		{"white space everywhere", " \t{ \"id\" :\r\n 5 , \"x\" : [ ] } \n", `5`, true},
		{"before a deep member", `{"id":9,"params":` + deep + `}`, `9`, true},
		{"after a deep member", `{"params":{"a":` + deep + `},"id":"late"}`, `"late"`, true},
		{"the id is the deep value", `{"jsonrpc":"2.0","id":` + deep + `,"method":"ping"}`, "", true},
		{"null", `{"id":null}`, "", true},
		{"true", `{"id":true}`, "", true},
		{"object", `{"id":{"n":1}}`, "", true},
		{"the last one counts", `{"id":1,"id":"two"}`, `"two"`, true},
		{"a last null counts too", `{"id":1,"id":null}`, "", true},
		{"escaped name", `{"\u0069\u0064":3}`, `3`, true},
		{"other case", `{"ID":3,"Id":4}`, "", true},
		{"nested only", `{"params":{"id":5}}`, "", true},
		{"inside a string", `{"x":"\"id\":5,"}`, "", true},
		{"empty object", `{}`, "", true},
		{"breaks off after the id", `{"jsonrpc":"2.0","id":5,"method":`, `5`, false},
		{"breaks off inside a deep member after the id", `{"id":5,"params":` + deep[:15000], `5`, false},
		{"breaks off inside the id", `{"id":12`, "", false},
		{"breaks off after the id's value", `{"id":12 `, "", false},
		{"string cut", `{"id":"abc`, "", false},
		{"garbage after the id's value", `{"id":5 x}`, "", false},
		{"a broken later id keeps the earlier", `{"id":1,"id":tru}`, `1`, false},
		{"trailing garbage", `{"id":1} x`, `1`, false},
		{"two objects", `{"id":1}{"id":2}`, `1`, false},
		{"bad escape before the id", `{"a":"\x","id":1}`, "", false},
		{"mismatched brackets before the id", `{"a":[1},"id":1}`, "", false},
		{"leading zero", `{"id":01}`, "", false},
		{"batch", `[{"id":1}]`, "", false},
		{"a number", `5`, "", false},
		{"empty", ``, "", false},
	}
	for _, tt := range tests {
		id, whole := RequestID([]byte(tt.frame))
		if string(id) != tt.want || whole != tt.whole {
			t.Errorf("%s: got %q, whole %v; want %q, whole %v", tt.name, id, whole, tt.want, tt.whole)
		}
	}
}

func TestTailID(t *testing.T) {
	tests := []struct {
		name string
		tail string
		want string // "" wants no id
	}{
		{"TypeScript's order", `"}},"jsonrpc":"2.0","id":5}`, `5`},
		{"string", `x"}},"jsonrpc":"2.0","id":"call-5"}`, `"call-5"`},
		{"string with escaped quotes", `,"id":"a\"b\\"}`, `"a\"b\\"`},
		{"large number", `,"id":123456789012345678901234567890}`, `123456789012345678901234567890`},
		{"white space and CR", ", \"id\" : 5 } \r", `5`},
		{"the whole object", `{"id":7}`, `7`},
		{"escaped name", `,"\u0069d":3}`, `3`},
		{"not the last member", `,"id":5,"x":1}`, ""},
		{"nested", `{"id":5}}`, ""},
		{"null", `,"id":null}`, ""},
		{"true", `,"id":true}`, ""},
		{"other name", `,"ID":5}`, ""},
		{"member cut at the start", `"id":5}`, ""},
		{"name's quote after a cut run of backslashes", `\"id":5}`, ""},
		{"value's quote after a cut run of backslashes", `\\",x":"\"id\":\"7"}`, ""},
		{"an escaped quote is no opening", `,"id":\"5"}`, ""},
		{"no closing brace", `,"id":5`, ""},
		{"bad number", `,"id":1.}`, ""},
		{"empty", ``, ""},
	}
	for _, tt := range tests {
		if got := TailID([]byte(tt.tail)); string(got) != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}

// referenceID is the id encoding/json finds in a JSON object: the last
// "id" member, when it is a string or a number.
func referenceID(t *testing.T, obj []byte) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatalf("encoding/json refuses %q, which the scanner takes as a whole object: %v", obj, err)
	}
	id := m["id"]
	if len(id) == 0 || (id[0] != '"' && id[0] != '-' && (id[0] < '0' || id[0] > '9')) {
		return nil
	}
	return id
}

// FuzzRequestID checks the id scanners against encoding/json and the
// SDK's decoder: whole is json.Valid for an object; on a whole object the
// id is the one encoding/json and the SDK read, and the tail of it gives
// that id or none; on anything, an id read forwards comes from a prefix
// that, closed, is an object with that id, and an id read backwards from
// a member that, opened, is one.
func FuzzRequestID(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":7,"method":"ping"}`,
		`{"method":"tools/call","params":{"a":[[[1]]]},"jsonrpc":"2.0","id":"x"}`,
		`{"id":1,"id":null}`, `{"\u0069d":1e5}`, `{"id":5,"method":`, `{"a":"\"id\":5}"}`,
		`{"id":"a\\\"b"}`, `[{"id":1}]`, `{"ID":1}`, `{"a":{"id":2},"id":-0.5}`,
		`{"jsonrpc":"2.0","\u0069d":1,"method":"x"}`, `{"jsonrpc":"2.0","id":1,"id":"2","method":"x"}`,
		`{"jsonrpc":"2.0","id":1,"ID":2,"method":"x"}`,
	} {
		f.Add([]byte(s), uint16(0))
	}
	f.Fuzz(func(t *testing.T, input []byte, cut uint16) {
		// encoding/json refuses more than 10000 levels; inputs shorter
		// than that cannot nest so deep.
		comparable := len(input) <= 10000
		id, end, whole := requestID(input)
		trimmed := bytes.TrimLeft(input, " \t\r\n")
		if comparable && whole != (json.Valid(input) && len(trimmed) > 0 && trimmed[0] == '{') {
			t.Fatalf("%q: whole %v; json.Valid %v", input, whole, json.Valid(input))
		}
		if whole && comparable {
			if want := referenceID(t, input); string(id) != string(want) {
				t.Fatalf("%q: id %q; encoding/json reads %q", input, id, want)
			}
			if tid := TailID(input[int(cut)%(len(input)+1):]); tid != nil && string(tid) != string(id) {
				t.Fatalf("%q: the tail from %d gives %q; the object's id is %q", input, cut, tid, id)
			}
		}
		if msg, err := jsonrpc.DecodeMessage(input); err == nil && comparable {
			var sdk jsonrpc.ID
			switch m := msg.(type) {
			case *jsonrpc.Request:
				sdk = m.ID
			case *jsonrpc.Response:
				sdk = m.ID
			}
			var v any
			if id != nil {
				if err := json.Unmarshal(id, &v); err != nil {
					t.Fatalf("%q: id %q does not decode: %v", input, id, err)
				}
			}
			if ours, err := jsonrpc.MakeID(v); err != nil || ours != sdk {
				t.Fatalf("%q: id %q (%v); the SDK reads %v", input, id, err, sdk.Raw())
			}
		}
		if id != nil {
			closed := append(bytes.Clone(input[:end]), '}')
			cid, cwhole := RequestID(closed)
			if !cwhole || string(cid) != string(id) {
				t.Fatalf("%q: id %q, read up to %d; %q closed gives %q, whole %v", input, id, end, closed, cid, cwhole)
			}
			if len(closed) <= 10000 {
				if want := referenceID(t, closed); string(want) != string(id) {
					t.Fatalf("%q: id %q; encoding/json reads %q from %q", input, id, want, closed)
				}
			}
		}
		if tid, at := tailID(input); tid != nil {
			opened := append([]byte{'{'}, input[at+1:]...)
			oid, owhole := RequestID(opened)
			if !owhole || string(oid) != string(tid) {
				t.Fatalf("%q: tail id %q from %d; %q gives %q, whole %v", input, tid, at, opened, oid, owhole)
			}
		}
	})
}
