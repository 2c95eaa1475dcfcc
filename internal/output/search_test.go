package output

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

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

	res, err := sp.Search(t.Context(), act.Handle(), "stdout", `^ERR! (\d+)$`, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []SearchMatch{{Offset: 20, Line: 3, LineOffset: 20, Text: "ERR! 0002"}, {Offset: 950, Line: 96, LineOffset: 950, Text: "ERR! 0095"}, {Offset: 990, Line: 100, LineOffset: 990, Text: "ERR! 0099"}}
	if fmt.Sprint(res.Matches) != fmt.Sprint(want) || res.Truncated {
		t.Errorf("got %v, truncated %v; want %v", res.Matches, res.Truncated, want)
	}
	if fmt.Sprint(res.Missing) != fmt.Sprint([]ByteRange{{100, 900}}) {
		t.Errorf("got missing %v; want [{100 900}]", res.Missing)
	}

	res, err = sp.Search(t.Context(), act.Handle(), "stdout", `ERR`, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 2 || !res.Truncated || res.Reason != "max_matches" {
		t.Errorf("got %d matches, truncated %v (%s); want 2, true, max_matches", len(res.Matches), res.Truncated, res.Reason)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err = sp.Search(ctx, act.Handle(), "stdout", `ERR`, 0, 0)
	if err != nil || !res.Truncated || res.Reason != "cancelled" {
		t.Errorf("cancelled search: got %+v, %v; want truncated, cancelled", res, err)
	}

	var pe *PatternError
	if _, err := sp.Search(t.Context(), act.Handle(), "stdout", `(unclosed`, 0, 0); !errors.As(err, &pe) {
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
	res, err := sp.Search(t.Context(), act.Handle(), "stdout", `NEEDLE`, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Matches) != 1 {
		t.Fatalf("got %d matches; want 1", len(res.Matches))
	}
	m := res.Matches[0]
	if m.Offset != 50<<20 || m.Line != 1 || len(m.Text) > lineTextBytes+2*len(clipMark) || !strings.Contains(m.Text, "NEEDLE") || !strings.HasPrefix(m.Text, clipMark) || !strings.HasSuffix(m.Text, clipMark) || m.LineOffset != 50<<20+6+1000-8<<20 {
		t.Errorf("got %+v (%d bytes of text); want offset %d, line 1, the line's retained part clipped around the match", m, len(m.Text), 50<<20)
	}
}

// refSearch is what Search must find: the first match of each line of the
// retained bytes, each range's lines on their own, with the line's number
// in the whole stream and the line's text, clipped as matchText clips it.
func refSearch(in []byte, retained []ByteRange, re *regexp.Regexp, maxMatches int) (matches []SearchMatch, truncated bool) {
	matches = []SearchMatch{}
	for _, r := range retained {
		for at := r.Start; at < r.End; {
			l := in[at:r.End]
			cutByGap := r.End < int64(len(in))
			if i := bytes.IndexByte(l, '\n'); i >= 0 {
				l, cutByGap = l[:i], false
			}
			if loc := re.FindIndex(l); loc != nil {
				if len(matches) == maxMatches {
					return matches, true
				}
				ms := loc[0]
				from, pre, suf := 0, "", ""
				if ms > lineTextBytes-snippetAfter {
					from, pre = ms-snippetBefore, clipMark
				}
				text := l[from:]
				if len(text) > lineTextBytes {
					text, suf = trimToRuneEnd(text[:lineTextBytes]), clipMark
				} else if cutByGap {
					suf = clipMark
				}
				if pre != "" {
					text = trimToRuneStart(text)
				}
				matches = append(matches, SearchMatch{
					Offset:     at + int64(ms),
					Line:       1 + int64(bytes.Count(in[:at], []byte{'\n'})),
					LineOffset: at,
					Text:       pre + string(bytes.ToValidUTF8(text, []byte("\uFFFD"))) + suf,
				})
			}
			at += int64(len(l)) + 1
		}
	}
	return matches, false
}

// searchWith runs the search over act's stdout with a buffer of bufBytes
// and lines matched as a stream past lineBytes (0: the pattern's own).
func searchWith(t testing.TB, sp *Spool, act *Action, pattern string, maxMatches, bufBytes, lineBytes int) (*SearchResult, error) {
	t.Helper()
	p, err := compilePattern(pattern)
	if err != nil {
		return nil, err
	}
	if lineBytes > 0 {
		p.lineBytes = lineBytes
	}
	rd, err := sp.open(context.Background(), act.Handle(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	return search(context.Background(), rd, p, maxMatches, 0, bufBytes)
}

// searchPatterns cover literal prefixes (which long lines skip to),
// assertions at a line's start, end and word boundaries, empty matches,
// case folding and characters of several bytes.
var searchPatterns = []string{
	`NEEDLE`, `^NEEDLE`, `NEEDLE$`, `\bab\b`, `ab\B`, `NE+DLE\b`, `a+b`, `(?i)needle`,
	`[ab]{3}c`, `x*`, `^$`, `€+`, `b$`, `^a`, `.{5}$`, `\x{FFFD}`, `e.?€`, `NEEDLE|^ab`,
	`NEEDLENEEDLE\b`, `\x{FFFD}€`, `(?i)k.{3}x`,
}

// searchText makes lines of the given lengths from a small alphabet with
// needles, multibyte characters, invalid and stray continuation bytes.
func searchText(rng *rand.Rand, lengths []int) []byte {
	pieces := []string{"a", "b", "ab", " ", "c", "NEEDLE", "needle", "€", "\xff", "\x82", "\xe2\x82", "e", "x", "K"}
	var b bytes.Buffer
	for i, n := range lengths {
		start := b.Len()
		for b.Len()-start < n {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		if i < len(lengths)-1 || rng.IntN(2) == 0 {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// TestSearchMatchesReference compares Search with refSearch over lines
// short and long, with buffers and stream thresholds small enough that
// lines cross every boundary: buffer refills, long lines, retention gaps.
func TestSearchMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	shapes := []struct {
		name    string
		lengths []int
		opts    SpoolOptions
	}{
		{"short lines", []int{0, 1, 5, 17, 3, 0, 40, 9}, SpoolOptions{RetainHeadBytes: 1 << 20}},
		{"long lines", []int{300, 2, 1000, 77, 5000}, SpoolOptions{RetainHeadBytes: 1 << 20}},
		{"gaps", []int{50, 200, 3, 900, 60, 400}, SpoolOptions{RetainHeadBytes: 97, RetainTailBytes: 301}},
		{"one line", []int{20000}, SpoolOptions{RetainHeadBytes: 1000, RetainTailBytes: 3000}},
	}
	// Windows need an overlap of the longest match and 4 within the line
	// size and half the buffer: {64, 40} and {1 << 10, 100} have them for
	// most patterns, the others for few or none.
	buffers := []struct{ buf, line int }{{8, 3}, {13, 13}, {64, 7}, {64, 40}, {1 << 10, 100}, {searchBufBytes, 0}}
	for _, sh := range shapes {
		sp, err := OpenSpool(t.TempDir(), sh.opts)
		if err != nil {
			t.Fatal(err)
		}
		for round := range 3 {
			in := searchText(rng, sh.lengths)
			act, sum := spoolOne(t, sp, nil, in)
			for _, pattern := range searchPatterns {
				re := regexp.MustCompile(pattern)
				want, wantTrunc := refSearch(in, sum.Retained, re, 7)
				for _, b := range buffers {
					got, err := searchWith(t, sp, act, pattern, 7, b.buf, b.line)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprint(got.Matches) != fmt.Sprint(want) || got.Truncated != wantTrunc {
						t.Errorf("%s, round %d, %q, buffer %d, lines past %d:\ngot  %v, truncated %v\nwant %v, %v", sh.name, round, pattern, b.buf, b.line, got.Matches, got.Truncated, want, wantTrunc)
					}
				}
			}
		}
	}
}

// FuzzSearch checks Search against refSearch for any text, pattern,
// retention and buffer sizes.
func FuzzSearch(f *testing.F) {
	f.Add([]byte("ab NEEDLE c\nxx\n€€NEEDLE\xff\n"), "NEEDLE", uint8(0), uint8(8), uint8(3))
	f.Add([]byte("aaaaaaaaaaaaaaaaaaaaab\nab ab\n"), `\bab\b`, uint8(1), uint8(9), uint8(2))
	f.Add([]byte("x\n\n\nyy"), `^$`, uint8(2), uint8(5), uint8(5))
	f.Add([]byte("abcabcabcNEEDLEabc"), `NEEDLE$|^abc`, uint8(3), uint8(6), uint8(1))
	spools := make([]*Spool, 4)
	for i, o := range []SpoolOptions{{RetainHeadBytes: 1 << 20}, {RetainHeadBytes: 7, RetainTailBytes: 9}, {RetainTailBytes: 13}, {RetainHeadBytes: 30, RetainTailBytes: 30}} {
		o.MaxBytes = 64 << 20
		sp, err := OpenSpool(f.TempDir(), o)
		if err != nil {
			f.Fatal(err)
		}
		spools[i] = sp
	}
	f.Fuzz(func(t *testing.T, in []byte, pattern string, layout, buf, line uint8) {
		re, err := regexp.Compile(pattern)
		if err != nil || len(pattern) > 64 {
			return
		}
		if _, err := compilePattern(pattern); err != nil {
			return
		}
		bufBytes := 8 + int(buf)
		sp := spools[int(layout)%len(spools)]
		act, sum := spoolOne(t, sp, nil, in)
		want, wantTrunc := refSearch(in, sum.Retained, re, 5)
		got, err := searchWith(t, sp, act, pattern, 5, bufBytes, 1+int(line))
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Matches) != fmt.Sprint(want) || got.Truncated != wantTrunc {
			t.Errorf("buffer %d, lines past %d:\ngot  %v, truncated %v\nwant %v, %v", bufBytes, 1+int(line), got.Matches, got.Truncated, want, wantTrunc)
		}
	})
}

// TestSearchPatternLimits refuses, as a *PatternError, patterns too long or
// whose program is too large, before compiling a large one.
func TestSearchPatternLimits(t *testing.T) {
	tests := []struct {
		name    string
		pattern string
		want    string // in the error; "" accepts the pattern
	}{
		{"slow but allowed", `[ab]{300}c`, ""},
		{"program too large", `[ab]{1000}c`, "too complex"},
		{"alternatives", alternatives(300), "too complex"},
		{"many repetitions", strings.Repeat("a{1000}", 500), "too complex"},
		{"too long", strings.Repeat("a", MaxPatternBytes+1), "longer than"},
		{"not RE2", `(?<=x)y`, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := compilePattern(tt.pattern)
			runtime.ReadMemStats(&after)
			var pe *PatternError
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v; want the pattern accepted", err)
			case tt.want != "" && (!errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v; want a *PatternError saying %q", err, tt.want)
			}
			// 500,000 instructions would take about 20 MiB to compile.
			if n := after.TotalAlloc - before.TotalAlloc; n > 4<<20 {
				t.Errorf("compiling took %d bytes; want the size refused before compiling", n)
			}
		})
	}
}

// alternatives is n different random words of 8 letters, as alternatives.
func alternatives(n int) string {
	rng := rand.New(rand.NewPCG(3, 4))
	words := make([]string, n)
	for i := range words {
		w := make([]byte, 8)
		for j := range w {
			w[j] = byte('a' + rng.IntN(26))
		}
		words[i] = string(w)
	}
	return strings.Join(words, "|")
}

// abLine spools one line of n random a's and b's: [ab]{300}c keeps 300
// matcher threads alive at every byte of it, about 6 s per MiB here.
func abLine(t *testing.T, sp *Spool, n int) *Action {
	t.Helper()
	rng := rand.New(rand.NewPCG(5, 8))
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, previews)
	chunk := make([]byte, 64<<10)
	for sent := 0; sent < n; sent += len(chunk) {
		for i := range chunk {
			chunk[i] = "ab"[rng.IntN(2)]
		}
		c.Write(chunk[:min(len(chunk), n-sent)])
	}
	act.Finish()
	return act
}

// TestSearchStopsInsideLongLine: a slow pattern over one 9 MiB line stops
// at the time limit, or when the caller's context ends, inside the line,
// and says so; it never reports a stopped search as complete. [ab]{300}c
// is matched in windows, [ab]{300}c$ (an assertion) as a stream, and
// a[ab]{300}c$ after skipping to its literal a.
func TestSearchStopsInsideLongLine(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	act := abLine(t, sp, 9<<20)
	tests := []struct {
		name       string
		limit      time.Duration
		ctx        func() (context.Context, context.CancelFunc)
		wantReason string
	}{
		{"time limit", 100 * time.Millisecond, func() (context.Context, context.CancelFunc) { return context.WithCancel(t.Context()) }, "time_limit"},
		{"caller's deadline", time.Hour, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 100*time.Millisecond)
		}, "cancelled"},
	}
	for _, tt := range tests {
		for _, pattern := range []string{`[ab]{300}c`, `[ab]{300}c$`, `a[ab]{300}c$`} {
			t.Run(tt.name+"/"+pattern, func(t *testing.T) {
				sp.searchLimit = tt.limit
				ctx, cancel := tt.ctx()
				defer cancel()
				res, err := sp.Search(ctx, act.Handle(), "stdout", pattern, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				if !res.Truncated || res.Reason != tt.wantReason || len(res.Matches) != 0 {
					t.Errorf("got truncated %v (%q), %d matches; want truncated, %q", res.Truncated, res.Reason, len(res.Matches), tt.wantReason)
				}
			})
		}
	}
}

// BenchmarkSearch measures search throughput over 9 MiB of log lines and
// over one 9 MiB line (a minified JSON body), with a literal and with a
// pattern that must run the matcher at every byte; none of them matches.
func BenchmarkSearch(b *testing.B) {
	sp, err := OpenSpool(b.TempDir(), testSpoolOptions)
	if err != nil {
		b.Fatal(err)
	}
	lines := textChunk(9 << 20)
	long := bytes.ReplaceAll(lines, []byte("\n"), []byte(" "))
	for _, data := range []struct {
		name string
		in   []byte
	}{{"lines", lines}, {"one-line", long}} {
		act := sp.Begin("bench", "local")
		c := act.Capture("stdout", nil, previews)
		c.Write(data.in)
		act.Finish()
		for _, pattern := range []string{`NEEDLE`, `id=[0-9a-f]{8} msg="failed`} {
			b.Run(data.name+"/"+pattern, func(b *testing.B) {
				b.SetBytes(int64(len(data.in)))
				reportCPU(b, len(data.in), func() {
					for b.Loop() {
						res, err := sp.Search(context.Background(), act.Handle(), "stdout", pattern, 0, 0)
						if err != nil || res.Truncated || len(res.Matches) != 0 {
							b.Fatalf("got %+v, %v; want a complete search with no match", res, err)
						}
					}
				})
			})
		}
	}
}
