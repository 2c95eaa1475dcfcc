package mcpserver

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// liftFrame is a tools/call of tool with args, its content padded to at
// least liftMin.
func liftFrame(tool, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`)
}

var big = strings.Repeat("QUJD", liftMin/4)

func TestLift(t *testing.T) {
	cases := []struct {
		name  string
		frame []byte
		lifts bool
	}{
		{"base64 content", liftFrame("ssh_upload", `{"target":"box","path":"/tmp/x","content":"`+big+`","encoding":"base64"}`), true},
		{"text content", liftFrame("ssh_upload", `{"content":"`+strings.Repeat("ünï ", liftMin/6)+`"}`), true},
		{"spaces around", []byte(` { "id" : 7 , "method" : "tools/call" , "params" : { "arguments" : { "content" : "` + big + `" } , "name" : "ssh_upload" } } `), true},
		{"small frame", liftFrame("ssh_upload", `{"content":"abc"}`), false},
		{"another tool", liftFrame("ssh_exec", `{"content":"`+big+`"}`), false},
		{"not a call of a tool", []byte(`{"id":7,"method":"tools/list","params":{"name":"ssh_upload","arguments":{"content":"` + big + `"}}}`), false},
		{"method escaped", []byte(`{"id":7,"method":"tools\/call","params":{"name":"ssh_upload","arguments":{"content":"` + big + `"}}}`), false},
		{"name escaped", liftFrame(`ssh\u005fupload`, `{"content":"`+big+`"}`), false},
		{"content with an escape", liftFrame("ssh_upload", `{"content":"`+big+`\n"}`), false},
		{"content not a string", liftFrame("ssh_upload", `{"content":["`+big+`"]}`), false},
		{"content not valid UTF-8", liftFrame("ssh_upload", `{"content":"`+big+"\xff"+`"}`), false},
		{"content named twice", liftFrame("ssh_upload", `{"content":"`+big+`","content":"other"}`), false},
		{"content named escaped too", liftFrame("ssh_upload", `{"content":"`+big+`","\u0063ontent":"other"}`), false},
		{"arguments twice", liftFrame("ssh_upload", `{"content":"`+big+`"},"arguments":{"content":"x"}`), false},
		{"params twice", []byte(`{"id":7,"method":"tools/call","params":{"name":"ssh_upload","arguments":{"content":"` + big + `"}},"params":{}}`), false},
		{"trailing bytes", append(liftFrame("ssh_upload", `{"content":"`+big+`"}`), '}'), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			small, value, ok := lift(c.frame, false)
			if _, shared, _ := lift(c.frame, true); shared != value {
				t.Errorf("lifted from an owned frame: a value of %d bytes; want the %d of a copy", len(shared), len(value))
			}
			if ok != c.lifts {
				t.Fatalf("lifted: %v; want %v", ok, c.lifts)
			}
			if !ok {
				if string(small) != string(c.frame) || value != "" {
					t.Errorf("a frame not lifted came back changed")
				}
				return
			}
			checkLifted(t, c.frame, small, value)
		})
	}
}

// checkLifted checks lift's promise: small decodes as frame does, with
// the placeholder for the content, which is value.
func checkLifted(t *testing.T, frame, small []byte, value string) {
	t.Helper()
	var want, got map[string]any
	if err := json.Unmarshal(frame, &want); err != nil {
		t.Fatalf("a frame that is not JSON was lifted: %v", err)
	}
	if err := json.Unmarshal(small, &got); err != nil {
		t.Fatalf("the lifted frame is not JSON: %v", err)
	}
	args := want["params"].(map[string]any)["arguments"].(map[string]any)
	if args["content"] != value {
		t.Errorf("lifted value differs from the content a decoder reads (%d bytes; want %d)", len(value), len(args["content"].(string)))
	}
	args["content"] = placeholder
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the lifted frame decodes to\n%.300v\nwant\n%.300v", got, want)
	}
	if len(small) > len(frame)-len(value)+len(placeholder) {
		t.Errorf("the lifted frame holds %d bytes; want no more than the frame without its value", len(small))
	}
}

// FuzzLift holds lift to what a decoder reads: whatever the frame, a
// lifted one decodes to the same message with the placeholder in the
// content's place, and the value is the content a decoder reads.
func FuzzLift(f *testing.F) {
	f.Add([]byte(`{"content":"abc","encoding":"base64"}`), []byte("ssh_upload"))
	f.Add([]byte(`{"content":"abc","content":"d"}`), []byte("ssh_upload"))
	f.Add([]byte(`{"\u0063ontent":"x","content":"abc"}`), []byte("ssh_upload"))
	f.Fuzz(func(t *testing.T, args, tool []byte) {
		// Padded past liftMin inside the arguments' first string, if any.
		padded := strings.Replace(string(args), `"abc"`, `"`+big+`"`, 1)
		frame := liftFrame(string(tool), padded)
		small, value, ok := lift(frame, true)
		if !ok {
			if string(small) != string(frame) {
				t.Fatal("a frame not lifted came back changed")
			}
			return
		}
		checkLifted(t, frame, small, value)
	})
}
