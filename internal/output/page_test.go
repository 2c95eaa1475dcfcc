package output

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// numbered makes n lines "line 0000\n", 10 bytes each.
func numbered(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "line %04d\n", i)
	}
	return b.Bytes()
}

func pageData(t *testing.T, p *Page) []byte {
	t.Helper()
	if p.Encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(p.Data)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []byte(p.Data)
}

func TestSpoolRead(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	in := numbered(100) // retained: [0,100) and [900,1000)
	act, sum := spoolOne(t, sp, nil, in)
	if want := []ByteRange{{0, 100}, {900, 1000}}; fmt.Sprint(sum.Retained) != fmt.Sprint(want) {
		t.Fatalf("retained %v; want %v", sum.Retained, want)
	}
	tests := []struct {
		name       string
		offset     int64
		fromEnd    bool
		limit      int
		wantOffset int64
		wantEnd    int64 // end of data
		wantNext   int64
		wantMiss   []ByteRange
	}{
		{"first page", 0, false, 50, 0, 50, 50, nil},
		{"up to the gap", 50, false, 100, 50, 100, 900, []ByteRange{{100, 900}}},
		{"in the gap", 500, false, 10, 900, 910, 910, []ByteRange{{500, 900}}},
		{"tail", 900, false, 0, 900, 1000, 1000, nil},
		{"from end", 30, true, 0, 970, 1000, 1000, nil},
		{"from end, no offset", 0, true, 40, 960, 1000, 1000, nil},
		{"negative offset", -30, false, 0, 970, 1000, 1000, nil},
		{"from end beyond start", 5000, true, 10, 0, 10, 10, nil},
		{"past the end", 5000, false, 10, 1000, 1000, 1000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sp.Read(act.Handle(), "stdout", tt.offset, tt.fromEnd, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if p.Offset != tt.wantOffset || p.NextOffset != tt.wantNext || fmt.Sprint(p.Missing) != fmt.Sprint(tt.wantMiss) {
				t.Errorf("got offset %d, next %d, missing %v; want %d, %d, %v", p.Offset, p.NextOffset, p.Missing, tt.wantOffset, tt.wantNext, tt.wantMiss)
			}
			if got, want := p.Data, string(in[tt.wantOffset:tt.wantEnd]); got != want {
				t.Errorf("got data %q; want %q", got, want)
			}
			if p.TotalBytes != 1000 || p.EOF != (tt.wantNext == 1000) {
				t.Errorf("got total %d, eof %v; want 1000, %v", p.TotalBytes, p.EOF, tt.wantNext == 1000)
			}
		})
	}
}

// TestSpoolReadWalk pages a stream from start to end in odd steps: every
// byte is either returned, equal to the input, or named missing, once.
func TestSpoolReadWalk(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1000, RetainTailBytes: 777})
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(strings.Repeat("naïve €uro 😀 text\n", 500))
	act, _ := spoolOne(t, sp, nil, in)
	var at int64
	for steps := 0; ; steps++ {
		p, err := sp.Read(act.Handle(), "stdout", at, false, 97)
		if err != nil {
			t.Fatal(err)
		}
		// Missing ranges come before the data, or after it up to NextOffset.
		miss := p.Missing
		for len(miss) > 0 && miss[0].End <= p.Offset {
			if miss[0].Start != at {
				t.Fatalf("missing %v does not start at %d", miss[0], at)
			}
			at, miss = miss[0].End, miss[1:]
		}
		if p.Offset != at {
			t.Fatalf("data at %d; want %d", p.Offset, at)
		}
		if p.Encoding != "" {
			t.Fatalf("page at %d is %s; want text", at, p.Encoding)
		}
		if want := string(in[at : at+int64(len(p.Data))]); p.Data != want {
			t.Fatalf("data at %d = %q; want %q", at, p.Data, want)
		}
		at += int64(len(p.Data))
		for _, m := range miss {
			if m.Start != at {
				t.Fatalf("missing %v after data does not start at %d", m, at)
			}
			at = m.End
		}
		if p.NextOffset != at {
			t.Fatalf("next offset %d; want %d", p.NextOffset, at)
		}
		if p.EOF {
			break
		}
		if steps > 1000 {
			t.Fatal("no end")
		}
	}
	if at != int64(len(in)) {
		t.Errorf("walk ended at %d; want %d", at, len(in))
	}
}

func TestSpoolReadCharacters(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	act, _ := spoolOne(t, sp, nil, []byte("€€€"))
	bin, _ := spoolOne(t, sp, nil, []byte("ab\x00\xffcd"))
	tests := []struct {
		name      string
		act       *Action
		offset    int64
		limit     int
		wantData  []byte
		wantEnc   string
		wantStart int64
	}{
		{"mid-character start moves back", act, 1, 3, []byte("€"), "", 0},
		{"cut character left for next page", act, 0, 5, []byte("€"), "", 0},
		{"limit below one character", act, 3, 1, []byte("€"), "", 3},
		{"binary is base64", bin, 0, 0, []byte("ab\x00\xffcd"), "base64", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sp.Read(tt.act.Handle(), "stdout", tt.offset, false, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if got := pageData(t, p); !bytes.Equal(got, tt.wantData) || p.Encoding != tt.wantEnc || p.Offset != tt.wantStart {
				t.Errorf("got %q (%q) at %d; want %q (%q) at %d", got, p.Encoding, p.Offset, tt.wantData, tt.wantEnc, tt.wantStart)
			}
			if p.NextOffset != p.Offset+int64(len(tt.wantData)) {
				t.Errorf("next %d; want %d", p.NextOffset, p.Offset+int64(len(tt.wantData)))
			}
		})
	}
}

func TestSpoolSearch(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(numbered(100)), "\n"), "\n")
	for _, i := range []int{2, 50, 95, 99} { // 50 is in the gap
		lines[i] = fmt.Sprintf("ERR! %04d\n", i)[:9]
	}
	in := []byte(strings.Join(lines, "\n") + "\n")
	act, _ := spoolOne(t, sp, nil, in)

	res, err := sp.Search(t.Context(), act.Handle(), "stdout", `^ERR! (\d+)$`, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []SearchMatch{{20, 3, "ERR! 0002"}, {950, 96, "ERR! 0095"}, {990, 100, "ERR! 0099"}}
	if fmt.Sprint(res.Matches) != fmt.Sprint(want) || res.Truncated {
		t.Errorf("got %v, truncated %v; want %v", res.Matches, res.Truncated, want)
	}
	if fmt.Sprint(res.Missing) != fmt.Sprint([]ByteRange{{100, 900}}) {
		t.Errorf("got missing %v; want [{100 900}]", res.Missing)
	}

	res, err = sp.Search(t.Context(), act.Handle(), "stdout", `ERR`, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 2 || !res.Truncated || res.Reason != "max_matches" {
		t.Errorf("got %d matches, truncated %v (%s); want 2, true, max_matches", len(res.Matches), res.Truncated, res.Reason)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err = sp.Search(ctx, act.Handle(), "stdout", `ERR`, 0)
	if err != nil || !res.Truncated || res.Reason != "cancelled" {
		t.Errorf("cancelled search: got %+v, %v; want truncated, cancelled", res, err)
	}

	var pe *PatternError
	if _, err := sp.Search(t.Context(), act.Handle(), "stdout", `(unclosed`, 0); !errors.As(err, &pe) {
		t.Errorf("got %v; want *PatternError", err)
	}
}

// TestSpoolSearchLongLine searches a 50 MiB line with no newline: the
// match in the retained tail is found with a short snippet.
func TestSpoolSearchLongLine(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1 << 20, RetainTailBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, previews)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 50 {
		c.Write(chunk)
	}
	c.Write([]byte("NEEDLE"))
	c.Write(chunk[:1000])
	act.Finish()
	res, err := sp.Search(t.Context(), act.Handle(), "stdout", `NEEDLE`, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 1 {
		t.Fatalf("got %d matches; want 1", len(res.Matches))
	}
	m := res.Matches[0]
	if m.Offset != 50<<20 || m.Line != 1 || len(m.Text) > snippetBytes || !strings.Contains(m.Text, "NEEDLE") {
		t.Errorf("got %+v (%d bytes of text); want offset %d, line 1, a short snippet with the match", m, len(m.Text), 50<<20)
	}
}

// TestSpoolReadGapEdges reads next to retention gaps: a character cut by a
// gap is named missing, but the same bytes in a binary stream are returned.
func TestSpoolReadGapEdges(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 4, RetainTailBytes: 4})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := spoolOne(t, sp, nil, []byte("€€€€")) // kept: [0,4) and [8,12)
	bin, _ := spoolOne(t, sp, nil, []byte("\x00\x81\x82\x83\x84\x85\x86\x87\x88\x89"))
	tests := []struct {
		name     string
		act      *Action
		offset   int64
		wantData []byte
		wantAt   int64
		wantMiss []ByteRange
		wantNext int64
	}{
		{"text before a gap", text, 0, []byte("€"), 0, []ByteRange{{3, 8}}, 8},
		{"text after a gap", text, 8, []byte("€"), 9, []ByteRange{{8, 9}}, 12},
		{"text in a gap", text, 5, []byte("€"), 9, []ByteRange{{5, 9}}, 12},
		{"binary before a gap", bin, 0, []byte("\x00\x81\x82\x83"), 0, []ByteRange{{4, 6}}, 6},
		{"binary after a gap", bin, 6, []byte("\x86\x87\x88\x89"), 6, nil, 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sp.Read(tt.act.Handle(), "stdout", tt.offset, false, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := pageData(t, p); !bytes.Equal(got, tt.wantData) || p.Offset != tt.wantAt || fmt.Sprint(p.Missing) != fmt.Sprint(tt.wantMiss) || p.NextOffset != tt.wantNext {
				t.Errorf("got %q at %d, missing %v, next %d; want %q at %d, missing %v, next %d", got, p.Offset, p.Missing, p.NextOffset, tt.wantData, tt.wantAt, tt.wantMiss, tt.wantNext)
			}
		})
	}
}
