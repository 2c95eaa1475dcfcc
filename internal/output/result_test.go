package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

// testOutput is shaped like the ssh_exec result.
type testOutput struct {
	Handle string `json:"handle"`
	Status string `json:"status"`
	Stdout Stream `json:"stdout"`
	Stderr Stream `json:"stderr"`
}

// frame builds the response as a client would receive it, with a long
// string id, independently of ResultSize.
func frame(t *testing.T, structured any, text string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      strings.Repeat("i", EnvelopeIDBytes-2),
		"result": map[string]any{
			"content":           []any{map[string]any{"type": "text", "text": text}},
			"structuredContent": structured,
			"isError":           true,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func TestBuildResultFits(t *testing.T) {
	controls := make([]byte, 0, 32)
	for c := byte(1); c < 32; c++ {
		controls = append(controls, c)
	}
	payloads := []struct {
		name string
		data func(w io.Writer)
	}{
		{"quotes", func(w io.Writer) { w.Write(bytes.Repeat([]byte(`"`), 300<<10)) }},
		{"backslashes", func(w io.Writer) { w.Write(bytes.Repeat([]byte(`\`), 300<<10)) }},
		{"control characters", func(w io.Writer) { w.Write(bytes.Repeat(controls, 10<<10)) }},
		{"4-byte characters", func(w io.Writer) { w.Write(bytes.Repeat([]byte("😀𝄞"), 40<<10)) }},
		{"html", func(w io.Writer) { w.Write(bytes.Repeat([]byte("<a&b>\u2028"), 40<<10)) }},
		{"mixed", func(w io.Writer) { w.Write(bytes.Repeat([]byte("é\"\\\x01😀x\n"), 30<<10)) }},
		{"50 MiB line", func(w io.Writer) {
			chunk := bytes.Repeat([]byte(`a"\`+"\x1f😀"), 32<<10)
			for n := 0; n < 50<<20; n += len(chunk) {
				w.Write(chunk)
			}
		}},
	}
	for _, pl := range payloads {
		var out testOutput
		var ref []byte // the whole redacted stream, for checking previews
		{
			sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1 << 20, RetainTailBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			act := sp.Begin("ssh_exec", "web1")
			lim := Limits{HeadBytes: 256 << 10, TailBytes: 256 << 10}
			c, e := act.Capture("stdout", nil, lim), act.Capture("stderr", nil, lim)
			pl.data(c)
			if pl.name != "50 MiB line" {
				var buf bytes.Buffer
				pl.data(&buf)
				ref = buf.Bytes()
			}
			e.Write([]byte("warning: \"quoted\" \\ and \x07 bell\n"))
			act.Finish()
			out = testOutput{Handle: act.Handle(), Status: "exited", Stdout: c.Summary(), Stderr: e.Summary()}
		}
		for _, budget := range []int{2048, 4096, 65536, 1 << 20} {
			t.Run(fmt.Sprintf("%s/%d", pl.name, budget), func(t *testing.T) {
				o := out
				spec := ResultSpec{
					Structured: &o, What: "ssh_exec on web1: exited with code 0 after 12 ms.", Handle: o.Handle,
					Streams: []NamedStream{{Name: "stdout", Summary: &o.Stdout}, {Name: "stderr", Summary: &o.Stderr}},
				}
				text, err := BuildResult(spec, budget)
				if err != nil {
					t.Fatal(err)
				}
				f := frame(t, &o, text)
				if !json.Valid(f) || len(f) > budget {
					t.Fatalf("frame is %d bytes (valid %v); want valid JSON within %d", len(f), json.Valid(f), budget)
				}
				s := o.Stdout
				if !utf8.ValidString(s.Head) || !utf8.ValidString(s.Tail) {
					t.Errorf("previews are not valid UTF-8")
				}
				if ref != nil && (!bytes.HasPrefix(ref, []byte(s.Head)) || !bytes.HasSuffix(ref, []byte(s.Tail))) {
					t.Errorf("previews are not the ends of the stream")
				}
				if s.Bytes != out.Stdout.Bytes || s.SHA256 != out.Stdout.SHA256 {
					t.Errorf("counts changed while fitting")
				}
				if s.Truncated != (int64(len(s.Head)+len(s.Tail)) < s.Bytes) {
					t.Errorf("truncated = %v with %d+%d of %d bytes shown", s.Truncated, len(s.Head), len(s.Tail), s.Bytes)
				}
				if s.Truncated && !strings.Contains(text, fmt.Sprintf(`read_output {"handle":%q,"stream":"stdout","offset":%d}`, o.Handle, len(s.Head))) {
					t.Errorf("text does not say how to read on after the head:\n%s", text)
				}
				if !strings.Contains(text, fmt.Sprintf("stdout: %d bytes, %s", s.Bytes, Plural(s.Lines, "line"))) {
					t.Errorf("text does not give the stdout counts:\n%s", text)
				}
				// A budget that fits more must not show less.
				if budget == 1<<20 && int64(len(s.Head)+len(s.Tail)) < min(s.Bytes, 512<<10)-8 && len(f) < budget/2 {
					t.Errorf("showed %d+%d bytes in a %d byte frame under a %d budget", len(s.Head), len(s.Tail), len(f), budget)
				}
			})
		}
	}
}

func TestBuildResultText(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, Limits{HeadBytes: 10, TailBytes: 10})
	e := act.Capture("stderr", nil, previews)
	c.Write(numbered(100))
	act.Finish()
	o := testOutput{Handle: act.Handle(), Stdout: c.Summary(), Stderr: e.Summary()}
	text, err := BuildResult(ResultSpec{Structured: &o, What: "ssh_exec on web1: exited with code 0.", Handle: o.Handle,
		Streams: []NamedStream{{Name: "stdout", Summary: &o.Stdout}, {Name: "stderr", Summary: &o.Stderr}}}, 65536)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"ssh_exec on web1: exited with code 0.\n",
		"--- stdout: 1000 bytes, 100 lines; shown: line 1 and line 100 ---\nline 0000\n[... 980 bytes not shown: lines 2-99, offsets 10-989 ...]\nline 0099\n",
		"(stdout: kept on disk for read_output: the first 100 bytes and the last 100 bytes (from offset 900); the rest was not kept.)\n",
		"--- stderr: empty ---\n",
		fmt.Sprintf(`read_output {"handle":%q,"stream":"stdout","offset":10}`, o.Handle),
		fmt.Sprintf(`read_output {"handle":%q,"stream":"stdout","line":2,"lines":98} (lines 2-99)`, o.Handle),
		fmt.Sprintf(`search_output {"handle":%q,"stream":"stdout","pattern":"error|fail|warn","context":2}`, o.Handle),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
}

func TestBuildResultTooLarge(t *testing.T) {
	o := testOutput{Status: strings.Repeat("x", 5000)}
	_, err := BuildResult(ResultSpec{Structured: &o, What: "ran", Handle: "h", Streams: []NamedStream{{Name: "stdout", Summary: &o.Stdout}}}, 2000)
	var tl *ResultTooLargeError
	if !errors.As(err, &tl) || tl.Budget != 2000 {
		t.Errorf("got %v; want *ResultTooLargeError", err)
	}
}

func TestFitPage(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte("\x01\"😀\\"), 20000) // 8 bytes raw, up to 16 escaped
	act, _ := spoolOne(t, sp, nil, in)
	bin, _ := spoolOne(t, sp, nil, bytes.Repeat([]byte{0, 0xff, 'a'}, 20000))
	for _, a := range []*Action{act, bin} {
		for _, budget := range []int{1024, 8192, 65536} {
			var got []byte
			var at int64
			for pages := 0; ; pages++ {
				p, err := sp.Read(t.Context(), a.Handle(), "stdout", at, false, MaxReadLimit, 0)
				if err != nil {
					t.Fatal(err)
				}
				text, err := FitPage(p, budget)
				if err != nil {
					t.Fatal(err)
				}
				if f := frame(t, p, text); len(f) > budget || !json.Valid(f) {
					t.Fatalf("page frame is %d bytes; want valid JSON within %d", len(f), budget)
				}
				if p.Offset != at || p.NextOffset != at+int64(len(p.raw)) {
					t.Fatalf("page [%d, next %d) with %d bytes; want it to start at %d and end at its data", p.Offset, p.NextOffset, len(p.raw), at)
				}
				got = append(got, pageData(t, p)...)
				at = p.NextOffset
				if p.EOF {
					break
				}
				if !strings.Contains(text, fmt.Sprintf(`"offset":%d`, at)) {
					t.Fatalf("text does not give the next offset %d: %s", at, text)
				}
				if pages > 10000 {
					t.Fatal("no end")
				}
			}
			all, _ := sp.Read(t.Context(), a.Handle(), "stdout", 0, false, MaxReadLimit, 0)
			if !bytes.Equal(got, pageData(t, all)) {
				t.Errorf("budget %d: pages joined differ from the stream", budget)
			}
		}
	}
}

func TestFitSearch(t *testing.T) {
	r := &SearchResult{Handle: "h", Stream: "stdout"}
	for i := range 200 {
		r.Matches = append(r.Matches, SearchMatch{Offset: int64(i * 300), Line: int64(i + 1), Text: strings.Repeat("\x01", 200)})
	}
	text, err := FitSearch(r, `\x01+`, 8192)
	if err != nil {
		t.Fatal(err)
	}
	if f := frame(t, r, text); len(f) > 8192 || !json.Valid(f) {
		t.Fatalf("frame is %d bytes; want valid JSON within 8192", len(f))
	}
	if len(r.Matches) == 0 || len(r.Matches) == 200 || !r.Truncated || r.Reason != "result_bytes" {
		t.Errorf("got %d matches, truncated %v (%s); want some dropped for result_bytes", len(r.Matches), r.Truncated, r.Reason)
	}
}

func TestFitText(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
	}{
		{"short", "unknown SSH target \"x\""},
		{"long", "unknown SSH target \"" + strings.Repeat("n", 100_000) + "\""},
		{"escaped six bytes each", strings.Repeat("\x01", 50_000)},
		{"multibyte", strings.Repeat("é", 50_000)},
		{"html", strings.Repeat("<a&b>\u2028", 20_000)},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, budget := range []int{4096, 65536} {
				got := FitText(c.text, budget)
				// A tool error as a client receives it: no structured
				// content, a long id.
				b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": strings.Repeat("i", EnvelopeIDBytes-2),
					"result": map[string]any{"content": []any{map[string]any{"type": "text", "text": got}}, "isError": true}})
				if err != nil {
					t.Fatal(err)
				}
				if size := len(b) + 1; size > budget {
					t.Errorf("budget %d: got a %d-byte result; want it to fit", budget, size)
				}
				if whole, _ := ResultSize(nil, c.text); whole <= budget && got != c.text {
					t.Errorf("budget %d: a text that fits was changed", budget)
				}
				if kept := strings.TrimSuffix(got, "..."); !strings.HasPrefix(c.text, kept) || !utf8.ValidString(got) {
					t.Errorf("budget %d: got %.40q...; want a valid prefix of the text", budget, got)
				}
			}
		})
	}
}
