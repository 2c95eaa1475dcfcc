package output

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
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
			p, err := sp.Read(t.Context(), act.Handle(), "stdout", tt.offset, tt.fromEnd, tt.limit, 0)
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
		p, err := sp.Read(t.Context(), act.Handle(), "stdout", at, false, 97, 0)
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
			p, err := sp.Read(t.Context(), tt.act.Handle(), "stdout", tt.offset, false, tt.limit, 0)
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
			p, err := sp.Read(t.Context(), tt.act.Handle(), "stdout", tt.offset, false, 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := pageData(t, p); !bytes.Equal(got, tt.wantData) || p.Offset != tt.wantAt || fmt.Sprint(p.Missing) != fmt.Sprint(tt.wantMiss) || p.NextOffset != tt.wantNext {
				t.Errorf("got %q at %d, missing %v, next %d; want %q at %d, missing %v, next %d", got, p.Offset, p.Missing, p.NextOffset, tt.wantData, tt.wantAt, tt.wantMiss, tt.wantNext)
			}
		})
	}
}

// TestSpoolReadAllocatesWhatItCanReturn: a page is no larger than the
// caller's maxBytes, and a read allocates about that, not its limit.
func TestSpoolReadAllocatesWhatItCanReturn(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	in := numbered(200 << 10) // 2 MiB
	act, _ := spoolOne(t, sp, nil, in)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p, err := sp.Read(t.Context(), act.Handle(), "stdout", 100, false, MaxReadLimit, 64<<10)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	// 10-byte lines: the page ends after the last newline in 64 KiB.
	if want := 64<<10 - (64<<10+100)%10; len(p.Data) != want || p.Data != string(in[100:100+want]) || p.NextOffset != 100+int64(want) {
		t.Errorf("got %d bytes at %d, next %d; want the %d bytes from 100 to the last line's end in 64 KiB", len(p.Data), p.Offset, p.NextOffset, want)
	}
	// The bytes read and their string: twice the page, not 1 MiB.
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Errorf("the read allocated %d bytes; want about 128 KiB", n)
	}
}

// TestSpoolReadTurns: reads and searches beyond MaxConcurrentReads wait
// for a turn, and give up with the caller's cause when its context ends.
func TestSpoolReadTurns(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1 << 20, MaxConcurrentReads: 2})
	if err != nil {
		t.Fatal(err)
	}
	act, _ := spoolOne(t, sp, nil, []byte("ERR one\n"))
	read := func(ctx context.Context) error {
		_, err := sp.Read(ctx, act.Handle(), "stdout", 0, false, 0, 0)
		return err
	}
	search := func(ctx context.Context) error {
		_, err := sp.Search(ctx, act.Handle(), "stdout", "ERR", 0, 0)
		return err
	}
	var held []func()
	for range 2 { // every turn taken
		release, err := sp.acquire(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, release)
	}
	cause := errors.New("the client went away")
	for _, call := range []func(context.Context) error{read, search} {
		ctx, cancel := context.WithCancelCause(t.Context())
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		cancel(cause)
		if err := <-done; !errors.Is(err, cause) {
			t.Errorf("call with every turn taken, then cancelled: got %v; want the cause", err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- read(t.Context()) }()
	held[0]()
	if err := <-done; err != nil {
		t.Errorf("read after a turn came free: %v", err)
	}
	held[1]()
	if err := search(t.Context()); err != nil {
		t.Errorf("search with turns free: %v", err)
	}
}

// TestReadersHelper runs in a child process for TestReadersRSS: it spools
// a 9 MiB line and 9 MiB of log lines, then starts 60 searches and 500
// reads of 1 MiB at once, and prints its peak RSS (VmHWM) in KiB.
func TestReadersHelper(t *testing.T) {
	dir := os.Getenv("OUTPUT_READERS_DIR")
	if dir == "" {
		t.Skip("helper process for TestReadersRSS")
	}
	opts := testSpoolOptions
	opts.MaxConcurrentReads = 4
	sp, err := OpenSpool(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Memory is measured here, not time: searches stop early.
	sp.searchLimit = 100 * time.Millisecond
	long := abLine(t, sp, 9<<20)
	lines, _ := spoolOne(t, sp, nil, textChunk(9<<20))
	searches := []struct {
		act     *Action
		pattern string
	}{
		{long, `NEEDLE`}, {long, `[ab]{30}c`}, {lines, `id=0+1`}, {lines, `[a-z]{200}`},
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 560)
	for i := range 60 {
		s := searches[i%len(searches)]
		wg.Go(func() {
			<-start
			if _, err := sp.Search(t.Context(), s.act.Handle(), "stdout", s.pattern, MaxMatches, 0); err != nil {
				errs <- err
			}
		})
	}
	for i := range 500 {
		act := []*Action{long, lines}[i%2]
		wg.Go(func() {
			<-start
			if _, err := sp.Read(t.Context(), act.Handle(), "stdout", int64(i)<<14, false, MaxReadLimit, MaxReadLimit); err != nil {
				errs <- err
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	fmt.Printf("vmhwm_kib=%d\n", vmHWM(t))
}

// TestReadersRSS proves in a real process that reads and searches are
// bounded in memory however many arrive at once: 60 searches and 500
// reads of 1 MiB over 18 MiB of spooled output.
func TestReadersRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("spools 18 MiB and runs 560 readers")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadersHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OUTPUT_READERS_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var kib int64
	i := strings.Index(string(out), "vmhwm_kib=")
	if i < 0 {
		t.Fatalf("helper printed no figure:\n%s", out)
	}
	if _, err := fmt.Sscanf(string(out[i:]), "vmhwm_kib=%d", &kib); err != nil {
		t.Fatalf("parse %q: %v", out, err)
	}
	t.Logf("peak RSS with 60 searches and 500 reads of 1 MiB at once: %d KiB", kib)
	if kib > 200<<10 {
		t.Errorf("peak RSS %d KiB; want under 200 MiB", kib)
	}
}
