package output

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
	"github.com/actiongw/actiongw/internal/redact"
)

// spoolOne runs one finished action whose stdout is in, written in chunks.
func spoolOne(t *testing.T, sp *Spool, red *redact.Redactor, in []byte) (*Action, Stream) {
	t.Helper()
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", red, previews)
	for len(in) > 0 {
		n := min(len(in), 997)
		c.Write(in[:n])
		in = in[n:]
	}
	act.Finish()
	return act, c.Summary()
}

func TestSpoolPermissions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state", "spool")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sp, err := OpenSpool(dir, testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	act, _ := spoolOne(t, sp, nil, []byte("hello\n"))
	for _, tt := range []struct {
		path string
		want os.FileMode
	}{
		{dir, 0o700 | os.ModeDir},
		{sp.own, 0o700 | os.ModeDir},
		{filepath.Join(sp.own, spoolOwnerFile), 0o600},
		{act.dir, 0o700 | os.ModeDir},
		{filepath.Join(act.dir, "stdout.out"), 0o600},
		{filepath.Join(act.dir, "meta.json"), 0o600},
	} {
		fi, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode(); got != tt.want {
			t.Errorf("mode of %s = %v; want %v", tt.path, got, tt.want)
		}
	}
}

func TestSpoolHandlesAreUnique(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 100 {
		h := sp.Begin("t", "x").Handle()
		if seen[h] || !handlePattern.MatchString(h) {
			t.Fatalf("handle %q repeated or malformed", h)
		}
		seen[h] = true
	}
}

func TestSpoolHandleErrors(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := spoolOne(t, sp, nil, []byte("x"))
	tests := []struct {
		name, handle, stream string
		want                 error
	}{
		{"malformed", "../../etc/passwd", "stdout", ErrMalformedHandle},
		{"empty", "", "stdout", ErrMalformedHandle},
		{"huge", strings.Repeat("a", 1<<20), "stdout", ErrMalformedHandle},
		{"unknown", handlePrefix + strings.Repeat("a", 26), "stdout", ErrUnknownHandle},
		{"unknown stream", done.Handle(), "stderr", ErrUnknownStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rerr := sp.Read(t.Context(), tt.handle, tt.stream, 0, false, 0, 0)
			_, serr := sp.Search(t.Context(), tt.handle, tt.stream, "x", 0, 0)
			for _, err := range []error{rerr, serr} {
				var he *HandleError
				if !errors.As(err, &he) || !errors.Is(err, tt.want) {
					t.Errorf("got %v; want a *HandleError wrapping %v", err, tt.want)
				}
				if len(err.Error()) > 300 {
					t.Errorf("error message is %d bytes; want it short", len(err.Error()))
				}
			}
		})
	}
}

func TestSpoolTTL(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sp.now = func() time.Time { return now }
	old, _ := spoolOne(t, sp, nil, []byte("old"))
	running := sp.Begin("ssh_exec", "web1")
	now = now.Add(2 * time.Hour)
	if _, err := sp.Read(t.Context(), old.Handle(), "stdout", 0, false, 0, 0); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("read after TTL: got %v; want ErrUnknownHandle", err)
	}
	if _, err := os.Stat(old.dir); !os.IsNotExist(err) {
		t.Errorf("expired action directory: stat err %v; want it removed", err)
	}
	if _, err := os.Stat(running.dir); err != nil {
		t.Errorf("running action directory: %v; want it kept", err)
	}
	running.Finish()
	if _, err := sp.Read(t.Context(), running.Handle(), "stdout", 0, false, 0, 0); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("got %v; want the finished action readable (no such stream)", err)
	}
}

// TestSpoolDiskCap counts actions in filesystem blocks: each takes a
// block for its directory, one for meta.json and one for its small
// stream file, and the spool three for its directory, this process's in it
// and spool.json.
func TestSpoolDiskCap(t *testing.T) {
	dir := t.TempDir()
	block := blockSize(dir)
	sp, err := OpenSpool(dir, SpoolOptions{MaxBytes: 9 * block, RetainHeadBytes: 1000, RetainTailBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sp.now = func() time.Time { now = now.Add(time.Second); return now }
	data := []byte(strings.Repeat("0123456789", 100)) // 1000 bytes each
	running := sp.Begin("ssh_exec", "long")
	rc := running.Capture("stdout", nil, previews)
	rc.Write(data)
	rc.Write(data) // 2000 bytes on disk, still running: 3 blocks
	a1, _ := spoolOne(t, sp, nil, data)
	a2, _ := spoolOne(t, sp, nil, data)
	// 3 + 3 + 3 + 3 blocks > 9: a1 went; the running one stays.
	readable := func(a *Action) bool {
		t.Helper()
		_, err := sp.Read(t.Context(), a.Handle(), "stdout", 0, false, 0, 0)
		if err != nil && !errors.Is(err, ErrUnknownHandle) {
			t.Fatal(err)
		}
		return err == nil
	}
	if readable(a1) || !readable(a2) {
		t.Errorf("a1 readable %v, a2 readable %v; want a1 evicted, a2 kept", readable(a1), readable(a2))
	}
	running.Finish()
	if p, err := sp.Read(t.Context(), running.Handle(), "stdout", 0, false, 0, 0); err != nil || p.TotalBytes != 2000 {
		t.Fatalf("running action: got %+v, %v; want it kept with 2000 bytes", p, err)
	}
	a3, _ := spoolOne(t, sp, nil, data)
	// Over again: the oldest finished (a2, before the long one) goes.
	if readable(a2) || !readable(running) || !readable(a3) {
		t.Errorf("a2 %v, long %v, a3 %v; want a2 evicted, the others kept", readable(a2), readable(running), readable(a3))
	}
	if got, want := diskUsage(t, dir), 9*block; got > want {
		t.Errorf("spool takes %d bytes on disk; want at most the cap, %d", got, want)
	}
	checkBooks(t, sp)
}

// TestSpoolDiskCapCountsEveryFile: with a cap smaller than one action,
// thousands of small actions leave no directory behind, and with a cap of
// some actions the spool's real disk use (st_blocks) never passes the cap.
func TestSpoolDiskCapCountsEveryFile(t *testing.T) {
	tests := []struct {
		name    string
		blocks  int64 // the cap, in filesystem blocks; 0 is 1024 bytes
		actions int
		wantMax int // action directories left, at most
	}{
		{"below one action", 0, 500, 0},
		{"some actions", 20, 200, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			block := blockSize(dir)
			limit := max(1024, tt.blocks*block)
			sp, err := OpenSpool(dir, SpoolOptions{MaxBytes: limit, RetainHeadBytes: 1 << 20, RetainTailBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for i := range tt.actions {
				act := sp.Begin("ssh_exec", "web1")
				act.Capture("stdout", nil, previews).Write([]byte("ok\n"))
				act.Capture("stderr", nil, previews).Write([]byte("warning\n"))
				act.Finish()
				if i%50 == 0 {
					// The spool's own three blocks take more than 1024.
					if got, want := diskUsage(t, dir), max(limit, 3*block); got > want {
						t.Fatalf("after %d actions the spool takes %d bytes on disk; want at most %d", i+1, got, want)
					}
				}
			}
			entries, err := os.ReadDir(sp.own)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(entries) - 1; got > tt.wantMax { // spool.json
				t.Errorf("%d action directories left; want at most %d", got, tt.wantMax)
			}
		})
	}
}

// reopenAs opens dir as the process id would, to which every other process
// has ended.
func reopenAs(t *testing.T, dir string, opts SpoolOptions, id owner.ID) *Spool {
	t.Helper()
	sp, err := openSpool(dir, opts, id, func(x owner.ID) bool { return x == id })
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestSpoolReopen: a later process reads the finished actions of one that
// ended, with the sizes it wrote them with, and what the disk holds of an
// action it did not finish, marked interrupted.
func TestSpoolReopen(t *testing.T) {
	dir := t.TempDir()
	opts := SpoolOptions{RetainHeadBytes: 10, RetainTailBytes: 10}
	sp, err := OpenSpool(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	act, _ := spoolOne(t, sp, nil, []byte("0123456789abcdefghijKLMNOPQRST"))
	short := sp.Begin("ssh_exec", "web1") // never finished: its process died
	short.Capture("stdout", nil, previews).Write([]byte("partial"))
	long := sp.Begin("ssh_exec", "web1")
	long.Capture("stdout", nil, previews).Write([]byte("0123456789abcdefghijKLMNOPQRST"))
	empty := sp.Begin("ssh_exec", "web1")

	// Other retain sizes must not change how the old files are read.
	sp2 := reopenAs(t, dir, SpoolOptions{RetainHeadBytes: 3, RetainTailBytes: 4}, "1000000001")
	if _, err := os.Stat(sp.own); !os.IsNotExist(err) {
		t.Errorf("the ended process's directory: stat err %v; want it taken over and removed", err)
	}
	tests := []struct {
		name        string
		act         *Action
		offset      int64
		wantData    string
		wantAt      int64
		wantTotal   int64
		interrupted bool
	}{
		{"finished", act, -10, "KLMNOPQRST", 20, 30, false},
		{"unfinished within the head", short, 0, "partial", 0, 7, true},
		{"unfinished past the head", long, 0, "0123456789", 0, 20, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := sp2.Read(t.Context(), tt.act.Handle(), "stdout", tt.offset, false, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.Data != tt.wantData || p.Offset != tt.wantAt || p.TotalBytes != tt.wantTotal || p.Interrupted != tt.interrupted {
				t.Errorf("got %q at %d of %d, interrupted %v; want %q at %d of %d, %v", p.Data, p.Offset, p.TotalBytes, p.Interrupted, tt.wantData, tt.wantAt, tt.wantTotal, tt.interrupted)
			}
			if tt.interrupted && !strings.Contains(pageText(t, p), "interrupted") {
				t.Errorf("page text does not say the action was interrupted")
			}
		})
	}
	// The ring of an unfinished action cannot be placed: reported missing.
	if p, _ := sp2.Read(t.Context(), long.Handle(), "stdout", 10, false, 0, 0); fmt.Sprint(p.Missing) != "[{10 20}]" || !p.EOF {
		t.Errorf("got missing %v, eof %v; want [10,20) missing and the end", p.Missing, p.EOF)
	}
	if _, err := sp2.Read(t.Context(), empty.Handle(), "stdout", 0, false, 0, 0); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("unfinished action without output: got %v; want it readable, with no streams", err)
	}
}

// pageText is the text block read_output would give with p.
func pageText(t *testing.T, p *Page) string {
	t.Helper()
	text, err := FitPage(p, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestSpoolDiskFull writes the spool into /dev/full, which fails every
// write with ENOSPC: the capture goes on, counts and hash stay whole, and
// the lost ranges are reported.
func TestSpoolDiskFull(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, previews)
	in := []byte(strings.Repeat("line\n", 100))
	c.Write(in[:50]) // the head takes these 50 bytes
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	st := c.spool.(*spoolStream)
	st.f.Close()
	st.f = full
	if n, err := c.Write(in[50:]); n != len(in)-50 || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in)-50)
	}
	act.Finish()
	sum := c.Summary()
	if sum.Bytes != int64(len(in)) || sum.SHA256 != sha(in) || sum.Lines != 100 {
		t.Errorf("got %d bytes, %d lines; want %d, 100 and the full hash", sum.Bytes, sum.Lines, len(in))
	}
	if !strings.Contains(sum.SpoolError, "no space left") {
		t.Errorf("spool error %q; want it to say the disk is full", sum.SpoolError)
	}
	p, err := sp.Read(t.Context(), act.Handle(), "stdout", 0, false, 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Data != string(in[:50]) || len(p.Missing) != 1 || p.Missing[0] != (ByteRange{50, 500}) || !p.EOF {
		t.Errorf("got data %q, missing %v, eof %v; want the first 50 bytes and [50,500) missing", p.Data, p.Missing, p.EOF)
	}
}

func TestSpoolUnwritableDir(t *testing.T) {
	// Removing the directory works as root too, where modes do not bind.
	dir := t.TempDir()
	sp, err := OpenSpool(dir, testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, previews)
	c.Write([]byte("still counted\n"))
	act.Finish()
	sum := c.Summary()
	if sum.Bytes != 14 || sum.Head != "still counted\n" || sum.SpoolError == "" || sum.Retained != nil {
		t.Errorf("got %+v; want counts, preview and a spool error", sum)
	}
}

// TestSpoolLazyFiles: a stream's file is made at its first byte. An empty
// stream has none and still reads as empty, here and after a reopen; a
// file that cannot be made then is a spool error, not a lost count.
func TestSpoolLazyFiles(t *testing.T) {
	dir := t.TempDir()
	sp, err := OpenSpool(dir, testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("ssh_exec", "web1")
	out := act.Capture("stdout", nil, previews)
	act.Capture("stderr", nil, previews)
	out.Write([]byte("only stdout\n"))
	act.Finish()
	if _, err := os.Stat(filepath.Join(act.dir, "stderr.out")); !os.IsNotExist(err) {
		t.Errorf("empty stderr: stat err %v; want no file", err)
	}
	check := func(s *Spool) {
		t.Helper()
		if p, err := s.Read(t.Context(), act.Handle(), "stderr", 0, false, 0, 0); err != nil || p.Data != "" || !p.EOF || p.Missing != nil {
			t.Errorf("empty stderr: got %+v, %v; want an empty page at EOF", p, err)
		}
		if p, err := s.Read(t.Context(), act.Handle(), "stdout", 0, false, 0, 0); err != nil || p.Data != "only stdout\n" {
			t.Errorf("stdout: got %+v, %v", p, err)
		}
	}
	check(sp)
	sp2 := reopenAs(t, dir, testSpoolOptions, "1000000002")
	check(sp2)

	act = sp2.Begin("ssh_exec", "web1")
	c := act.Capture("stdout", nil, previews)
	if err := os.RemoveAll(act.dir); err != nil { // gone before the first byte
		t.Fatal(err)
	}
	c.Write([]byte("still counted\n"))
	act.Finish()
	if sum := c.Summary(); sum.Bytes != 14 || !strings.Contains(sum.SpoolError, "stdout.out") || sum.Retained != nil {
		t.Errorf("got %+v; want the count and a spool error naming the file", sum)
	}
}

// TestSpoolConcurrent runs actions side by side with reads and evictions;
// run it with -race.
func TestSpoolConcurrent(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{MaxBytes: 64 << 10, RetainHeadBytes: 4 << 10, RetainTailBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	red, err := newRedactor(map[string][]byte{"k": []byte("secret-value")})
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(strings.Repeat("a secret-value in a line\n", 2000))
	want := sha(red.Redact(in))
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			var err error
			for range 10 {
				act, sum := spoolOne(t, sp, red, in)
				if sum.SHA256 != want {
					err = fmt.Errorf("got sha %s; want %s", sum.SHA256, want)
				}
				// Another goroutine's eviction may already have taken it.
				if _, rerr := sp.Read(t.Context(), act.Handle(), "stdout", -100, false, 0, 0); rerr != nil && !errors.Is(rerr, ErrUnknownHandle) {
					err = rerr
				}
			}
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	checkBooks(t, sp)
}

// checkBooks checks what the spool keeps to evict without looking at
// every action: its disk total is the sum of what its running actions and
// its finished list take, its finished list is oldest first, and holds
// every finished action the spool keeps whole.
func checkBooks(t *testing.T, sp *Spool) {
	t.Helper()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var total int64
	for _, a := range sp.actions {
		if a.running {
			total += a.diskBytes()
		}
	}
	listed := map[string]bool{}
	for i, e := range sp.finished {
		total += e.disk
		listed[e.handle()] = true
		if a := sp.actions[e.handle()]; a != nil && (a.running || a.diskBytes() != e.disk) {
			t.Errorf("finished list [%d] %s: running, or taking %d bytes; want finished, %d", i, e.handle(), a.diskBytes(), e.disk)
		}
		if i > 0 && e.finished < sp.finished[i-1].finished {
			t.Errorf("finished list [%d] %s finished before the one ahead of it", i, e.handle())
		}
	}
	for h, a := range sp.actions {
		if !a.running && !listed[h] {
			t.Errorf("finished action %s kept whole but not in the finished list", h)
		}
	}
	if got := sp.disk.Load(); got != total {
		t.Errorf("spool's disk total %d; want the sum over its actions, %d", got, total)
	}
}

// liveSet says which fake process IDs run, for spools opened in one test
// process as if by several.
type liveSet struct {
	mu    sync.Mutex
	alive map[owner.ID]bool
}

func (l *liveSet) set(id owner.ID, alive bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.alive[id] = alive
}

func (l *liveSet) Alive(id owner.ID) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.alive[id]
}

func (l *liveSet) open(t *testing.T, dir string, opts SpoolOptions, id owner.ID) *Spool {
	t.Helper()
	l.set(id, true)
	sp, err := openSpool(dir, opts, id, l.Alive)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// readAll reads a stream whole, or returns the error.
func readAll(t *testing.T, sp *Spool, handle string) (*Page, error) {
	t.Helper()
	return sp.Read(t.Context(), handle, "stdout", 0, false, MaxReadLimit, 0)
}

// TestSpoolOwners runs spools of several processes on one directory (see
// TestSpoolSharedProcesses for real ones): a process never reads, evicts
// or reclaims another live one's actions; once that one has ended, its
// finished actions are taken over and its unfinished ones recovered.
func TestSpoolOwners(t *testing.T) {
	dir := t.TempDir()
	procs := &liveSet{alive: map[owner.ID]bool{}}
	a := procs.open(t, dir, testSpoolOptions, "101.1")
	aDone, _ := spoolOne(t, a, nil, []byte("finished by a\n"))
	aRun := a.Begin("ssh_exec", "web1")
	aOut := aRun.Capture("stdout", nil, previews)
	aOut.Write([]byte("running in a\n"))

	// b starts, evicts everything of its own at once, and reclaims.
	b := procs.open(t, dir, SpoolOptions{TTL: time.Nanosecond, MaxBytes: 1, RetainHeadBytes: 1 << 20}, "102.1")
	bDone, _ := spoolOne(t, b, nil, []byte("b\n"))
	b.Reclaim(1 << 40)
	if _, err := readAll(t, b, bDone.Handle()); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("b's own action under b's cap: got %v; want it evicted", err)
	}
	for _, act := range []*Action{aDone, aRun} {
		if _, err := readAll(t, b, act.Handle()); !errors.Is(err, ErrUnknownHandle) {
			t.Errorf("b reading a's action: got %v; want ErrUnknownHandle", err)
		}
		if _, err := os.Stat(act.dir); err != nil {
			t.Errorf("a's action after b's start, eviction and reclaim: %v", err)
		}
	}
	aOut.Write([]byte("more\n"))
	aRun.Finish()
	for _, act := range []*Action{aDone, aRun} {
		if _, err := readAll(t, a, act.Handle()); err != nil {
			t.Errorf("a reading its own action: %v", err)
		}
	}

	// c ends with an action unfinished; b finds it at its next look.
	c := procs.open(t, dir, testSpoolOptions, "103.1")
	cRun := c.Begin("ssh_exec", "web1")
	cRun.Capture("stdout", nil, previews).Write([]byte("cut short"))
	procs.set("103.1", false)
	now := time.Now().Add(adoptEvery)
	b.now = func() time.Time { return now }
	b.opts.TTL, b.opts.MaxBytes = 0, 0
	if p, err := readAll(t, b, cRun.Handle()); err != nil || p.Data != "cut short" || !p.Interrupted {
		t.Errorf("b reading ended c's unfinished action: got %+v, %v; want its bytes, interrupted", p, err)
	}
	if _, err := os.Stat(c.own); !os.IsNotExist(err) {
		t.Errorf("c's directory: stat err %v; want it taken over", err)
	}

	// a ends: Reclaim takes over its actions before evicting.
	procs.set("101.1", false)
	if freed := b.Reclaim(0); freed != 0 {
		t.Errorf("Reclaim(0) freed %d; want nothing", freed)
	}
	for _, tt := range []struct {
		act  *Action
		want string
	}{{aDone, "finished by a\n"}, {aRun, "running in a\nmore\n"}} {
		if p, err := readAll(t, b, tt.act.Handle()); err != nil || p.Data != tt.want || p.Interrupted {
			t.Errorf("b reading ended a's action: got %+v, %v; want %q", p, err, tt.want)
		}
	}
	checkBooks(t, b)
}

// TestSpoolAdoptRace: when two processes start at the same moment, each
// action that ended ones left goes to exactly one of them: those of an
// ended process's directory, of a takeover that stopped halfway, and of
// the version before owner directories.
func TestSpoolAdoptRace(t *testing.T) {
	dir := t.TempDir()
	procs := &liveSet{alive: map[owner.ID]bool{}}
	want := map[string]string{}
	for _, id := range []owner.ID{"201.1", "205.1"} {
		dead := procs.open(t, dir, testSpoolOptions, id)
		for i := range 20 {
			act, _ := spoolOne(t, dead, nil, []byte(fmt.Sprintf("action %d of %s\n", i, id)))
			want[act.Handle()] = fmt.Sprintf("action %d of %s\n", i, id)
		}
		procs.set(id, false)
	}
	// A takeover by 299.1 that stopped halfway.
	if err := os.Rename(filepath.Join(dir, "owner-205.1"), filepath.Join(dir, "adopt-299.1-205.1")); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		h := handlePrefix + strings.Repeat("c", 25) + string(rune('a'+i))
		writeLegacy(t, dir, h, "legacy\n")
		want[h] = "legacy\n"
	}
	var spools [2]*Spool
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range spools {
		id := owner.ID(fmt.Sprintf("%d.1", 202+i))
		procs.set(id, true)
		wg.Go(func() {
			<-start
			sp, err := openSpool(dir, testSpoolOptions, id, procs.Alive)
			if err != nil {
				t.Error(err)
				return
			}
			spools[i] = sp
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	for h, w := range want {
		var found []string
		for _, sp := range spools {
			if p, err := readAll(t, sp, h); err == nil {
				found = append(found, p.Data)
			}
		}
		if len(found) != 1 || found[0] != w {
			t.Errorf("%s: read by %d processes as %q; want by one, %q", h, len(found), found, w)
		}
	}
	// The adopters move the rest in on their goroutines.
	for _, sp := range spools {
		sp.settle()
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ownerDirPrefix) {
			t.Errorf("left in the spool directory: %s", e.Name())
		}
	}
}

// writeLegacy writes a finished action as the version before owner
// directories did, at the top of the spool directory.
func writeLegacy(t *testing.T, dir, handle, data string) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, handle), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, handle, "stdout.out"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Format(time.RFC3339Nano)
	meta := fmt.Sprintf(`{"handle":%q,"tool":"ssh_exec","target":"web1","started":%q,"finished":%q,"streams":[{"name":"stdout","head_cap":1048576,"tail_cap":8388608,"total":%d,"newlines":1,"head_kept":%d}]}`,
		handle, now, now, len(data), len(data))
	if err := os.WriteFile(filepath.Join(dir, handle, "meta.json"), []byte(meta), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestSpoolReclaim evicts the oldest finished actions until it has freed
// what was asked, never a running one.
func TestSpoolReclaim(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sp.now = func() time.Time { now = now.Add(time.Second); return now }
	running := sp.Begin("ssh_exec", "web1")
	running.Capture("stdout", nil, previews).Write(bytes.Repeat([]byte("r"), 3*int(sp.block)))
	var acts []*Action
	for range 3 {
		act, _ := spoolOne(t, sp, nil, []byte("done\n"))
		acts = append(acts, act)
	}
	each := acts[0].diskBytes()
	if freed := sp.Reclaim(each + 1); freed != 2*each {
		t.Errorf("Reclaim(%d) freed %d; want the two oldest, %d", each+1, freed, 2*each)
	}
	for i, act := range acts {
		_, err := readAll(t, sp, act.Handle())
		if gone := errors.Is(err, ErrUnknownHandle); gone != (i < 2) {
			t.Errorf("action %d: got %v; want evicted %v", i, err, i < 2)
		}
	}
	if freed := sp.Reclaim(1 << 40); freed != each {
		t.Errorf("Reclaim of everything freed %d; want the last finished one, %d", freed, each)
	}
	if _, err := os.Stat(running.dir); err != nil {
		t.Errorf("running action: %v; want it kept", err)
	}
	running.Finish()
	checkBooks(t, sp)
}

// TestSpoolLegacyLayout: actions a version before owner directories left
// at the top of the spool directory load if they finished, and are removed
// if they did not.
func TestSpoolLegacyLayout(t *testing.T) {
	dir := t.TempDir()
	finished := handlePrefix + strings.Repeat("a", 26)
	unfinished := handlePrefix + strings.Repeat("b", 26)
	writeLegacy(t, dir, finished, "legacy\n")
	if err := os.Mkdir(filepath.Join(dir, unfinished), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, unfinished, "stdout.out"), []byte("legacy\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := OpenSpool(dir, testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := readAll(t, sp, finished); err != nil || p.Data != "legacy\n" {
		t.Errorf("finished legacy action: got %+v, %v; want it readable", p, err)
	}
	for _, h := range []string{finished, unfinished} {
		if _, err := os.Stat(filepath.Join(dir, h)); !os.IsNotExist(err) {
			t.Errorf("%s at the top: stat err %v; want it moved or removed", h, err)
		}
	}
	if _, err := readAll(t, sp, unfinished); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("unfinished legacy action: got %v; want ErrUnknownHandle", err)
	}
}

// TestSpoolProcessHelper is a serve process for TestSpoolSharedProcesses:
// it opens the spool in $OUTPUT_SPOOL_HELPER_DIR, finishes one action,
// leaves one running, prints their handles and then answers commands on
// stdin: "finish", and "read HANDLE".
func TestSpoolProcessHelper(t *testing.T) {
	dir, name := os.Getenv("OUTPUT_SPOOL_HELPER_DIR"), os.Getenv("OUTPUT_SPOOL_HELPER_NAME")
	if dir == "" {
		t.Skip("helper process for TestSpoolSharedProcesses")
	}
	sp, err := OpenSpool(dir, testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	done, _ := spoolOne(t, sp, nil, []byte("finished by "+name+"\n"))
	run := sp.Begin("ssh_exec", "web1")
	out := run.Capture("stdout", nil, previews)
	out.Write([]byte("running in " + name + "\n"))
	fmt.Printf("ready %s %s\n", done.Handle(), run.Handle())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "finish":
			out.Write([]byte("more\n"))
			run.Finish()
			fmt.Println("finished")
		case "read":
			if p, err := readAll(t, sp, arg); err != nil {
				fmt.Printf("error %q\n", err)
			} else {
				fmt.Printf("data %q %v\n", p.Data, p.Interrupted)
			}
		}
	}
}

// spoolProcess is a running TestSpoolProcessHelper.
type spoolProcess struct {
	cmd               *exec.Cmd
	stdin             io.WriteCloser
	lines             *bufio.Scanner
	finished, running string // its handles
}

func startSpoolProcess(t *testing.T, dir, name string) *spoolProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolProcessHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), "OUTPUT_SPOOL_HELPER_DIR="+dir, "OUTPUT_SPOOL_HELPER_NAME="+name)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &spoolProcess{cmd: cmd, stdin: stdin, lines: bufio.NewScanner(stdout)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	if _, err := fmt.Sscanf(p.line(t), "ready %s %s", &p.finished, &p.running); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return p
}

// line returns the next line the process prints for the test.
func (p *spoolProcess) line(t *testing.T) string {
	t.Helper()
	for p.lines.Scan() {
		if l := p.lines.Text(); !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	t.Fatalf("helper process ended: %v", p.lines.Err())
	return ""
}

func (p *spoolProcess) do(t *testing.T, cmd string) string {
	t.Helper()
	if _, err := fmt.Fprintln(p.stdin, cmd); err != nil {
		t.Fatal(err)
	}
	return p.line(t)
}

// TestSpoolSharedProcesses runs real processes on one spool directory: a
// second one's start, eviction and reclaim leave a running one's actions
// alone, which it goes on writing and reading; the actions of one killed
// mid-action are taken over by the next to start, the unfinished one as
// interrupted; those of one that exits by whoever looks next.
func TestSpoolSharedProcesses(t *testing.T) {
	dir := t.TempDir()
	a := startSpoolProcess(t, dir, "a")

	// This test process is a second server, which evicts all it can.
	sp, err := OpenSpool(dir, SpoolOptions{TTL: time.Nanosecond, MaxBytes: 1, RetainHeadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	spoolOne(t, sp, nil, []byte("mine\n"))
	sp.Reclaim(1 << 40)
	for _, h := range []string{a.finished, a.running} {
		if _, err := readAll(t, sp, h); !errors.Is(err, ErrUnknownHandle) {
			t.Errorf("reading a's action here: got %v; want ErrUnknownHandle", err)
		}
	}
	if got := a.do(t, "finish"); got != "finished" {
		t.Fatalf("a: %s", got)
	}
	for _, tt := range []struct{ handle, want string }{
		{a.finished, `data "finished by a\n" false`},
		{a.running, `data "running in a\nmore\n" false`},
	} {
		if got := a.do(t, "read "+tt.handle); got != tt.want {
			t.Errorf("a reading its action: got %s; want %s", got, tt.want)
		}
	}

	c := startSpoolProcess(t, dir, "c")
	if err := c.cmd.Process.Kill(); err != nil { // SIGKILL, mid-action
		t.Fatal(err)
	}
	c.cmd.Wait()
	d := startSpoolProcess(t, dir, "d")
	for _, tt := range []struct{ handle, want string }{
		{c.finished, `data "finished by c\n" false`},
		{c.running, `data "running in c\n" true`},
		{a.finished, `error "output handle \"` + a.finished + `\": unknown output handle: it never existed here, or it expired and was evicted"`},
	} {
		if got := d.do(t, "read "+tt.handle); got != tt.want {
			t.Errorf("d reading %s: got %s; want %s", tt.handle, got, tt.want)
		}
	}

	a.stdin.Close()
	if err := a.cmd.Wait(); err != nil {
		t.Fatalf("a: %v", err)
	}
	sp.opts.TTL, sp.opts.MaxBytes = 0, 0
	sp.Reclaim(0)
	if p, err := readAll(t, sp, a.running); err != nil || p.Data != "running in a\nmore\n" {
		t.Errorf("reading ended a's action here: got %+v, %v", p, err)
	}
}

// A running action's streams are read as far as they arrived: running
// set, no EOF, and a page of the ring that newer bytes replaced while it
// was read is refused, never returned mixed.
func TestSpoolReadRunning(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{TTL: time.Hour, MaxBytes: 1 << 30, RetainHeadBytes: 4, RetainTailBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	a := sp.Begin("ssh_exec", "web1")
	c := a.Capture("stdout", nil, previews)
	c.Write([]byte("0123456789\n"))
	p, err := sp.Read(t.Context(), a.Handle(), "stdout", 0, false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Running || p.EOF || p.TotalBytes != 11 || p.Data != "0123456789\n" {
		t.Errorf("page of a running stream: %+v; want running, not EOF, all 11 bytes", p)
	}
	if r, err := sp.Search(t.Context(), a.Handle(), "stdout", "5", 0, 0); err != nil || !r.Running || len(r.Matches) != 1 {
		t.Errorf("search of a running stream: %+v, %v; want running and one match", r, err)
	}

	// A reader that looked at 11 bytes, then the ring moves on by 20.
	rd, err := sp.open(t.Context(), a.Handle(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("abcdefghijklmnopqrst"))
	if err := rd.readAt(make([]byte, 2), 5); !errors.Is(err, ErrOverwritten) {
		t.Errorf("read of replaced ring bytes: %v; want ErrOverwritten", err)
	}
	if err := rd.readAt(make([]byte, 4), 0); err != nil {
		t.Errorf("read of the head, which never moves: %v", err)
	}
	rd.Close()
	a.Finish()
	p, err = sp.Read(t.Context(), a.Handle(), "stdout", -4, false, 0, 0)
	if err != nil || p.Running || !p.EOF || p.Data != "qrst" {
		t.Errorf("page after Finish: %+v, %v; want the last 4 bytes, EOF", p, err)
	}
}

// The live edge of a running stream may end inside a character: the page
// and the snapshot leave it out instead of calling the stream binary.
func TestSpoolRunningSplitCharacter(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	a := sp.Begin("ssh_exec", "web1")
	c := a.Capture("stdout", nil, previews)
	euro := []byte("€") // 3 bytes
	c.Write(append([]byte("price: "), euro[:2]...))
	p, err := sp.Read(t.Context(), a.Handle(), "stdout", 0, false, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Encoding != "" || p.Data != "price: " || p.NextOffset != 7 {
		t.Errorf("page at a split character: %+v; want the text before it, next at 7", p)
	}
	if s := c.Snapshot(); s.Binary || s.Head != "price: " {
		t.Errorf("snapshot at a split character: %+v; want text without the partial character", s)
	}
	c.Write(euro[2:])
	if p, _ = sp.Read(t.Context(), a.Handle(), "stdout", 7, false, 0, 0); p.Data != "€" {
		t.Errorf("page after the character completed: %+v", p)
	}
	a.Finish()
}

// BenchmarkSpoolAction is one small action (begin, a stdout write,
// finish, a read) on a spool that keeps 1 and 20000 finished actions, at
// its disk cap so that every action evicts one: what an action costs must
// not grow with what the spool holds.
func BenchmarkSpoolAction(b *testing.B) {
	for _, kept := range []int{1, 20000} {
		b.Run(fmt.Sprintf("kept=%d", kept), func(b *testing.B) {
			dir := b.TempDir()
			block := blockSize(dir)
			// Each action takes three blocks: its directory, meta.json and
			// stdout.out; the spool three of its own.
			sp, err := OpenSpool(dir, SpoolOptions{MaxBytes: int64(3+3*kept) * block, RetainHeadBytes: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			line := []byte("ok\n")
			one := func() {
				act := sp.Begin("ssh_exec", "web1")
				act.Capture("stdout", nil, previews).Write(line)
				act.Finish()
				if _, err := sp.Read(b.Context(), act.Handle(), "stdout", 0, false, 0, 0); err != nil {
					b.Fatal(err)
				}
			}
			for range kept {
				one()
			}
			if got := len(sp.finished); got != kept {
				b.Fatalf("spool keeps %d actions; want %d", got, kept)
			}
			for b.Loop() {
				one()
			}
		})
	}
}

// TestSpoolKeepsNewest: with a cap smaller than one action, a result named
// a handle its own Finish had evicted. Now the KeepNewest newest finished
// actions stay past MaxBytes (older ones go first); a result built from an
// action evicted since says why nothing of it is kept; and TTL and Reclaim
// still evict the newest.
func TestSpoolKeepsNewest(t *testing.T) {
	const keep = 3
	dir := t.TempDir()
	sp, err := OpenSpool(dir, SpoolOptions{MaxBytes: 1024, KeepNewest: keep, RetainHeadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	var acts []*Action
	var caps []*Capture
	for i := range 20 {
		act := sp.Begin("ssh_exec", "web1")
		c := act.Capture("stdout", nil, previews)
		c.Write([]byte(fmt.Sprintf("line %d\n", i)))
		act.Finish()
		if s := c.Summary(); s.SpoolError != "" || len(s.Retained) != 1 {
			t.Fatalf("action %d just finished: %+v; want it kept", i, s)
		}
		if p, err := sp.Read(t.Context(), act.Handle(), "stdout", 0, false, 0, 0); err != nil || p.Data != fmt.Sprintf("line %d\n", i) {
			t.Fatalf("action %d read back at once: %+v, %v; want its output", i, p, err)
		}
		acts, caps = append(acts, act), append(caps, c)
	}
	for i, act := range acts {
		_, err := sp.Read(t.Context(), act.Handle(), "stdout", 0, false, 0, 0)
		s := caps[i].Summary()
		if i < len(acts)-keep {
			if !errors.Is(err, ErrUnknownHandle) || !strings.Contains(s.SpoolError, "spool_max_bytes") || s.Retained == nil || len(s.Retained) != 0 {
				t.Errorf("old action %d: read %v, summary %+v; want it evicted and its summary saying so", i, err, s)
			}
		} else if err != nil || s.SpoolError != "" {
			t.Errorf("newest action %d: read %v, spool error %q; want it kept", i, err, s.SpoolError)
		}
	}
	entries, err := os.ReadDir(sp.own)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(entries) - 1; got != keep { // spool.json
		t.Errorf("%d action directories left; want %d", got, keep)
	}
	checkBooks(t, sp)

	// Reclaim (the disk is full) takes the newest too.
	if freed := sp.Reclaim(1 << 40); freed == 0 {
		t.Error("Reclaim freed nothing; want the newest evicted for a full disk")
	}
	if s := caps[len(caps)-1].Summary(); !strings.Contains(s.SpoolError, "disk was full") {
		t.Errorf("after Reclaim: spool error %q; want the full disk named", s.SpoolError)
	}

	// So does TTL.
	now := time.Now()
	sp.mu.Lock()
	sp.now = func() time.Time { now = now.Add(time.Second); return now }
	sp.opts.TTL = time.Millisecond
	sp.mu.Unlock()
	act, sum := spoolOne(t, sp, nil, []byte("short-lived\n"))
	if _, err := sp.Read(t.Context(), act.Handle(), "stdout", 0, false, 0, 0); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("read past its TTL: %v; want it evicted", err)
	}
	if !strings.Contains(sum.SpoolError, "spool_ttl") {
		t.Errorf("summary past its TTL: spool error %q; want it expired", sum.SpoolError)
	}
	checkBooks(t, sp)
}

// TestSpoolAdoptsInBackground: a spool an ended process left many actions
// in opened only after moving each of them in (28 s for 80,000 here). Now
// OpenSpool claims the directory and the adopter moves them in after it
// returns: a read of one not moved yet moves it at once, Close stops the
// adopter, and a later process takes over what it left.
func TestSpoolAdoptsInBackground(t *testing.T) {
	dir := t.TempDir()
	opts := SpoolOptions{RetainHeadBytes: 1 << 10}
	a := reopenAs(t, dir, opts, "101.1")
	var handles []string
	for i := range 3 * adoptBatch {
		act, _ := spoolOne(t, a, nil, fmt.Appendf(nil, "action %d\n", i))
		handles = append(handles, act.Handle())
	}
	a.Close()

	b := reopenAs(t, dir, opts, "102.1")
	last := handles[len(handles)-1]
	if p, err := b.Read(t.Context(), last, "stdout", 0, false, 0, 0); err != nil || p.Data != fmt.Sprintf("action %d\n", len(handles)-1) {
		t.Fatalf("read at once after open: %+v, %v; want the action taken over", p, err)
	}
	b.Close() // the adopter may have moved some in, or none
	c := reopenAs(t, dir, opts, "103.1")
	c.settle()
	for i, h := range handles {
		if p, err := c.Read(t.Context(), h, "stdout", 0, false, 0, 0); err != nil || p.Data != fmt.Sprintf("action %d\n", i) {
			t.Fatalf("action %d after two takeovers: %+v, %v", i, p, err)
		}
	}
	c.mu.Lock()
	n, claims := len(c.finished), len(c.claims)
	c.mu.Unlock()
	if n != len(handles) || claims != 0 {
		t.Errorf("%d finished actions, %d claims left; want %d and none", n, claims, len(handles))
	}
	checkBooks(t, c)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), adoptDirPrefix) {
			t.Errorf("claimed directory %s left after the adopter settled", e.Name())
		}
	}
	c.Close()
}
