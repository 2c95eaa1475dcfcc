package output

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineCuts(t *testing.T) {
	tests := []struct {
		name         string
		in           string
		afterNewline bool
		wantHead     string
		wantHeadCut  bool
		wantTail     string
		wantTailCut  bool
	}{
		{"lines", "ab\ncd\nef", false, "ab\ncd\n", false, "cd\nef", false},
		{"one line longer than the budget", "abcdef", false, "abcdef", true, "abcdef", true},
		{"CRLF", "ab\r\ncd\r\nef\r\n", false, "ab\r\ncd\r\nef\r\n", false, "cd\r\nef\r\n", false},
		{"no final newline", "ab\ncd", false, "ab\n", false, "cd", false},
		{"tail already at a line", "ab\ncd", true, "ab\n", false, "ab\ncd", false},
		{"only newline at the end", "abcd\n", false, "abcd\n", false, "abcd\n", true},
		// Cut inside "€" (3 bytes) at both ends.
		{"multibyte at the cut", "\x82\xacab€\n€x€\xe2\x82", false, "\x82\xacab€\n", false, "€x€\xe2\x82", false},
		{"multibyte, one line", "\x82\xacab€€\xe2\x82", false, "\x82\xacab€€", true, "ab€€\xe2\x82", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, hc := lineEnd([]byte(tt.in))
			if string(h) != tt.wantHead || hc != tt.wantHeadCut {
				t.Errorf("lineEnd(%q) = %q, %v; want %q, %v", tt.in, h, hc, tt.wantHead, tt.wantHeadCut)
			}
			tl, tc := lineStart([]byte(tt.in), tt.afterNewline)
			if string(tl) != tt.wantTail || tc != tt.wantTailCut {
				t.Errorf("lineStart(%q, %v) = %q, %v; want %q, %v", tt.in, tt.afterNewline, tl, tc, tt.wantTail, tt.wantTailCut)
			}
		})
	}
}

func TestReadLines(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	in := numbered(100) // lines 1-10 kept in [0,100), 91-100 in [900,1000)
	act, _ := spoolOne(t, sp, nil, in)
	short, _ := spoolOne(t, sp, nil, []byte("a\nb"))
	line := func(i int) string { return fmt.Sprintf("line %04d\n", i-1) }
	tests := []struct {
		name        string
		act         *Action
		line        int64
		lines       int
		limit       int
		wantData    string
		wantErrText string
	}{
		{"start", act, 1, 3, 0, line(1) + line(2) + line(3), ""},
		{"middle of the head", act, 5, 2, 0, line(5) + line(6), ""},
		{"to the gap", act, 9, 5, 0, line(9) + line(10), ""},
		{"in the tail, counted from the end", act, 95, 2, 0, line(95) + line(96), ""},
		{"last line", act, 100, 0, 0, line(100), ""},
		{"a limit ends the page at a line", act, 1, 5, 25, line(1) + line(2), ""},
		{"huge lines is bounded", act, 2, 1 << 30, 0, string(in[10:100]), ""},
		{"no final newline", short, 2, 1, 0, "b", ""},
		{"past the end", act, 101, 1, 0, "", "past the end: stdout has 100 lines"},
		{"past the end, no final newline", short, 3, 1, 0, "", "past the end: stdout has 2 lines"},
		{"far past the end", act, 1 << 62, 1, 0, "", "past the end"},
		{"in the gap", act, 50, 1, 0, "", "not kept on disk (offsets 100 to 899)"},
		{"just after the head", act, 11, 1, 0, "", "not kept on disk (offsets 100 to 899)"},
		// The tail's first line may begin in the gap: its start is unknown.
		{"first line of the tail", act, 91, 1, 0, "", "not kept on disk (offsets 100 to 899)"},
		{"zero", act, 0, 1, 0, "", "lines are numbered from 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sp.ReadLines(t.Context(), tt.act.Handle(), "stdout", tt.line, tt.lines, tt.limit, 0)
			if tt.wantErrText != "" {
				var le *LineError
				if !errors.As(err, &le) || !strings.Contains(err.Error(), tt.wantErrText) {
					t.Errorf("got %v; want a *LineError saying %q", err, tt.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Data != tt.wantData || p.Line != tt.line {
				t.Errorf("got line %d, data %q; want line %d, %q", p.Line, p.Data, tt.line, tt.wantData)
			}
			text, err := FitPage(p, 65536)
			if err != nil {
				t.Fatal(err)
			}
			if want := lineSpan(tt.line, tt.line+linesIn(tt.wantData)-1); !strings.Contains(text, want) {
				t.Errorf("text %q; want it to say %q", text, want)
			}
		})
	}
}

// TestReadLinesHostile: line numbers chosen to make the server work are
// answered from the counts, or within the scan of what is retained, and a
// cancelled caller gets its cause.
func TestReadLinesHostile(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1 << 20, RetainTailBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, previews)
	chunk := numbered(100 << 10) // 1 MiB of 10-byte lines
	for range 64 {
		c.Write(chunk)
	}
	act.Finish()
	const total = 64 * 100 << 10 // lines
	for _, n := range []int64{total + 1, 1 << 40, 1<<63 - 1} {
		if _, err := sp.ReadLines(t.Context(), act.Handle(), "stdout", n, MaxReadLines, 0, 0); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("has %d lines", total)) {
			t.Errorf("line %d: got %v; want past the end of %d lines", n, err, total)
		}
	}
	if _, err := sp.ReadLines(t.Context(), act.Handle(), "stdout", total/2, 1, 0, 0); err == nil || !strings.Contains(err.Error(), "not kept on disk") {
		t.Errorf("line in the middle: got %v; want it refused as not kept", err)
	}
	p, err := sp.ReadLines(t.Context(), act.Handle(), "stdout", total-2, 1<<30, 0, 0)
	if err != nil || p.Data != "line 102397\nline 102398\nline 102399\n" {
		t.Errorf("the last 3 lines: got %v, %v; want them", p, err)
	}
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("client went away")
	cancel(cause)
	if _, err := sp.ReadLines(ctx, act.Handle(), "stdout", total-2, 1, 0, 0); !errors.Is(err, cause) {
		t.Errorf("cancelled: got %v; want the cause", err)
	}
}

func TestSearchLinesAndContext(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1 << 20, RetainTailBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 3000)
	in := "a1\nERR one\na3\na4\na5\nERR six\nERR seven\na8\n" + long + "ERR far" + long + "\nERR ten\n"
	act, _ := spoolOne(t, sp, nil, []byte(in))
	res, err := sp.Search(t.Context(), act.Handle(), "stdout", "ERR", 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	farLine := int64(strings.Index(in, long))
	want := []SearchMatch{
		{Offset: 3, Line: 2, LineOffset: 3, Text: "ERR one", Before: []string{"a1"}, After: []string{"a3", "a4"}},
		{Offset: 20, Line: 6, LineOffset: 20, Text: "ERR six", Before: []string{"a4", "a5"}, After: []string{"ERR seven", "a8"}},
		{Offset: 28, Line: 7, LineOffset: 28, Text: "ERR seven", Before: []string{"a5", "ERR six"}, After: []string{"a8", long[:contextTextBytes] + clipMark}},
		{Offset: farLine + 3000, Line: 9, LineOffset: farLine, Text: clipMark + long[:snippetBefore] + "ERR far" + long[:lineTextBytes-snippetBefore-7] + clipMark,
			Before: []string{"ERR seven", "a8"}, After: []string{"ERR ten"}},
		{Offset: int64(len(in) - 8), Line: 10, LineOffset: int64(len(in) - 8), Text: "ERR ten", Before: []string{"a8", long[:contextTextBytes] + clipMark}},
	}
	if g, w := fmt.Sprintf("%+v", res.Matches), fmt.Sprintf("%+v", want); g != w {
		t.Errorf("got\n%s\nwant\n%s", g, w)
	}

	// A huge context is bounded.
	res, err = sp.Search(t.Context(), act.Handle(), "stdout", "ERR one", 0, 1<<30)
	if err != nil || len(res.Matches) != 1 || len(res.Matches[0].After) != min(MaxContextLines, 8) {
		t.Errorf("context 1<<30: got %+v, %v; want the lines after, at most %d", res, err, MaxContextLines)
	}

	// At max_matches, the last match still gets its lines after it.
	res, err = sp.Search(t.Context(), act.Handle(), "stdout", "ERR", 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 2 || fmt.Sprint(res.Matches[1].After) != "[ERR seven]" || res.Reason != "max_matches" {
		t.Errorf("max_matches 2: got %+v (%s); want 2 matches, the second with its line after", res.Matches, res.Reason)
	}

	text, err := FitSearch(res, "ERR", 65536)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`read_output {"handle":%q,"stream":"stdout","line":1,"lines":12}`, act.Handle()); !strings.Contains(text, want) {
		t.Errorf("text %q; want a ready read by line: %s", text, want)
	}
	if placeholder.MatchString(text) {
		t.Errorf("text has a placeholder: %s", text)
	}
}

// TestSearchContextAtAGap: lines around a match do not reach across bytes
// that were not kept.
func TestSearchContextAtAGap(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	in := numbered(100)
	copy(in[90:], "ERR! 0009\n")
	copy(in[900:], "ERR! 0090\n")
	act, _ := spoolOne(t, sp, nil, in)
	res, err := sp.Search(t.Context(), act.Handle(), "stdout", "ERR", 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 2 || res.Matches[0].After != nil || res.Matches[1].Before != nil || len(res.Matches[1].After) != 3 {
		t.Errorf("got %+v; want no context across the gap", res.Matches)
	}
}

// placeholder is a hint's stand-in value like <name> or <match offset>.
var placeholder = regexp.MustCompile(`<[a-zA-Z][a-zA-Z0-9 _-]*>`)

// TestBuildResultRandom: for random streams, limits and budgets, the
// response fits the budget, the text carries the same previews as the
// structured result, the cut previews break at lines, and no hint has a
// placeholder.
func TestBuildResultRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "bc", " ", "\n", "\r\n", "é", "€", "😀", `"`, `\`, "\x01", "ERR"}
	for i := range 300 {
		var stdout, stderr bytes.Buffer
		for n := rng.IntN(1 << uint(rng.IntN(18))); stdout.Len() < n; {
			stdout.WriteString(pieces[rng.IntN(len(pieces))])
		}
		for n := rng.IntN(300); stderr.Len() < n; {
			stderr.WriteString(pieces[rng.IntN(len(pieces))])
		}
		sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: int64(rng.IntN(4096)), RetainTailBytes: int64(rng.IntN(4096))})
		if err != nil {
			t.Fatal(err)
		}
		act := sp.Begin("ssh_exec", "web1")
		lim := Limits{HeadBytes: rng.IntN(8192), TailBytes: rng.IntN(8192)}
		c, e := act.Capture("stdout", nil, lim), act.Capture("stderr", nil, lim)
		c.Write(stdout.Bytes())
		e.Write(stderr.Bytes())
		act.Finish()
		o := testOutput{Handle: act.Handle(), Status: "exited", Stdout: c.Summary(), Stderr: e.Summary()}
		budget := 1500 + rng.IntN(40000)
		text, err := BuildResult(ResultSpec{Structured: &o, What: "ssh_exec on web1: exited with code 0.", Handle: o.Handle,
			Streams: []NamedStream{{Name: "stdout", Summary: &o.Stdout}, {Name: "stderr", Summary: &o.Stderr}}}, budget)
		var tl *ResultTooLargeError
		if errors.As(err, &tl) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f := frame(t, &o, text)
		if len(f) > budget || !json.Valid(f) {
			t.Fatalf("case %d: frame of %d bytes, valid %v; want valid within %d", i, len(f), json.Valid(f), budget)
		}
		if placeholder.MatchString(text) {
			t.Fatalf("case %d: text has a placeholder:\n%s", i, text)
		}
		for _, s := range []Stream{o.Stdout, o.Stderr} {
			if !utf8.ValidString(s.Head) || !utf8.ValidString(s.Tail) || !strings.Contains(text, s.Head) || !strings.Contains(text, s.Tail) {
				t.Fatalf("case %d: previews %q, %q are not valid or not in the text:\n%s", i, s.Head, s.Tail, text)
			}
			if s.Truncated && s.Head != "" && !strings.HasSuffix(s.Head, "\n") && strings.Contains(s.Head, "\n") {
				t.Fatalf("case %d: cut head %q ends inside a line", i, s.Head)
			}
			if !strings.Contains(text, fmt.Sprintf("%d bytes, %s", s.Bytes, Plural(s.Lines, "line"))) && s.Bytes > 0 {
				t.Fatalf("case %d: text lacks the counts:\n%s", i, text)
			}
		}
	}
}
