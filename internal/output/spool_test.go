package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
		{filepath.Join(dir, act.Handle()), 0o700 | os.ModeDir},
		{filepath.Join(dir, act.Handle(), "stdout.out"), 0o600},
		{filepath.Join(dir, act.Handle(), "meta.json"), 0o600},
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
	running := sp.Begin("ssh_exec", "web1")
	running.Capture("stdout", nil, previews)
	tests := []struct {
		name, handle, stream string
		want                 error
	}{
		{"malformed", "../../etc/passwd", "stdout", ErrMalformedHandle},
		{"empty", "", "stdout", ErrMalformedHandle},
		{"huge", strings.Repeat("a", 1<<20), "stdout", ErrMalformedHandle},
		{"unknown", handlePrefix + strings.Repeat("a", 26), "stdout", ErrUnknownHandle},
		{"running", running.Handle(), "stdout", ErrActionRunning},
		{"unknown stream", done.Handle(), "stderr", ErrUnknownStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, rerr := sp.Read(tt.handle, tt.stream, 0, false, 0)
			_, serr := sp.Search(t.Context(), tt.handle, tt.stream, "x", 0)
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
	running.Finish()
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
	if _, err := sp.Read(old.Handle(), "stdout", 0, false, 0); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("read after TTL: got %v; want ErrUnknownHandle", err)
	}
	if _, err := os.Stat(old.dir); !os.IsNotExist(err) {
		t.Errorf("expired action directory: stat err %v; want it removed", err)
	}
	if _, err := os.Stat(running.dir); err != nil {
		t.Errorf("running action directory: %v; want it kept", err)
	}
	running.Finish()
	if _, err := sp.Read(running.Handle(), "stdout", 0, false, 0); !errors.Is(err, ErrUnknownStream) {
		t.Errorf("got %v; want the finished action readable (no such stream)", err)
	}
}

func TestSpoolDiskCap(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{MaxBytes: 2500, RetainHeadBytes: 1000, RetainTailBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sp.now = func() time.Time { now = now.Add(time.Second); return now }
	data := []byte(strings.Repeat("0123456789", 100)) // 1000 bytes each
	running := sp.Begin("ssh_exec", "long")
	rc := running.Capture("stdout", nil, previews)
	rc.Write(data)
	rc.Write(data) // 2000 bytes on disk, still running
	a1, _ := spoolOne(t, sp, nil, data)
	a2, _ := spoolOne(t, sp, nil, data)
	// 4000 bytes > 2500: a1 went first, then a2; the running one stays.
	for _, a := range []*Action{a1, a2} {
		if _, err := sp.Read(a.Handle(), "stdout", 0, false, 0); !errors.Is(err, ErrUnknownHandle) {
			t.Errorf("%s: got %v; want it evicted", a.Handle(), err)
		}
	}
	running.Finish()
	p, err := sp.Read(running.Handle(), "stdout", 0, false, 0)
	if err != nil {
		t.Fatalf("running action was evicted: %v", err)
	}
	if p.TotalBytes != 2000 {
		t.Errorf("got total %d; want 2000", p.TotalBytes)
	}
	a3, _ := spoolOne(t, sp, nil, data)
	// 3000 > 2500 again: the oldest finished (the long one) goes.
	if _, err := sp.Read(a3.Handle(), "stdout", 0, false, 0); err != nil {
		t.Errorf("newest action: %v", err)
	}
	if _, err := sp.Read(running.Handle(), "stdout", 0, false, 0); !errors.Is(err, ErrUnknownHandle) {
		t.Errorf("oldest action: got %v; want it evicted", err)
	}
}

func TestSpoolReopen(t *testing.T) {
	dir := t.TempDir()
	sp, err := OpenSpool(dir, SpoolOptions{RetainHeadBytes: 10, RetainTailBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	act, _ := spoolOne(t, sp, nil, []byte("0123456789abcdefghijKLMNOPQRST"))
	crashed := sp.Begin("ssh_exec", "web1") // never finished: its process died
	// Other retain sizes must not change how the old files are read.
	sp2, err := OpenSpool(dir, SpoolOptions{RetainHeadBytes: 3, RetainTailBytes: 4})
	if err != nil {
		t.Fatal(err)
	}
	p, err := sp2.Read(act.Handle(), "stdout", -10, false, 0)
	if err != nil {
		t.Fatal(err)
	}
	if p.Data != "KLMNOPQRST" || p.Offset != 20 {
		t.Errorf("got %q at %d; want %q at 20", p.Data, p.Offset, "KLMNOPQRST")
	}
	if _, err := os.Stat(crashed.dir); !os.IsNotExist(err) {
		t.Errorf("unfinished action dir: stat err %v; want it removed", err)
	}
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
	p, err := sp.Read(act.Handle(), "stdout", 0, false, 1000)
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
	if _, err := os.Stat(filepath.Join(dir, act.Handle(), "stderr.out")); !os.IsNotExist(err) {
		t.Errorf("empty stderr: stat err %v; want no file", err)
	}
	sp2, err := OpenSpool(dir, testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Spool{sp, sp2} {
		if p, err := s.Read(act.Handle(), "stderr", 0, false, 0); err != nil || p.Data != "" || !p.EOF || p.Missing != nil {
			t.Errorf("empty stderr: got %+v, %v; want an empty page at EOF", p, err)
		}
		if p, err := s.Read(act.Handle(), "stdout", 0, false, 0); err != nil || p.Data != "only stdout\n" {
			t.Errorf("stdout: got %+v, %v", p, err)
		}
	}

	act = sp.Begin("ssh_exec", "web1")
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
				if _, rerr := sp.Read(act.Handle(), "stdout", -100, false, 0); rerr != nil && !errors.Is(rerr, ErrUnknownHandle) {
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
}
