package output

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/redact"
	"github.com/actiongw/actiongw/internal/testkit/proc"
)

func captureAll(t testing.TB, red *redact.Redactor, lim Limits, in []byte, sizes []int) Stream {
	t.Helper()
	c := newCapture(red, lim, nil)
	for i := 0; len(in) > 0; i++ {
		n := min(max(sizes[i%len(sizes)], 1), len(in))
		if got, err := c.Write(in[:n]); got != n || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil", got, err, n)
		}
		in = in[n:]
	}
	c.flush()
	return c.Summary()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestCaptureSummary(t *testing.T) {
	red, err := newRedactor(map[string][]byte{"tok": []byte("hunter22")})
	if err != nil {
		t.Fatal(err)
	}
	small := Limits{HeadBytes: 8, TailBytes: 8}
	tests := []struct {
		name string
		in   string
		lim  Limits
		want Stream // SHA256 is checked against the redacted input
	}{
		{"empty", "", small, Stream{}},
		{"short", "hi\nyo", small, Stream{Bytes: 5, Lines: 2, Head: "hi\nyo"}},
		{"final newline", "a\nb\n", small, Stream{Bytes: 4, Lines: 2, Head: "a\nb\n"}},
		{"head and tail meet", "0123456789abcdef", small, Stream{Bytes: 16, Lines: 1, Head: "01234567", Tail: "89abcdef", tailMidLine: true}},
		{"gap", "0123456789abcdefXYZ", small, Stream{Bytes: 19, Lines: 1, Head: "01234567", Tail: "bcdefXYZ", Truncated: true, tailMidLine: true}},
		// "€" is 3 bytes; the head cut at byte 8 falls inside the second
		// one. The whole stream fits in both previews, split after the head.
		{"head cut in a character", "abc€€€€", small, Stream{Bytes: 15, Lines: 1, Head: "abc€", Tail: "€€€", tailMidLine: true}},
		{"cut in characters", "abc€€€€xy", small, Stream{Bytes: 17, Lines: 1, Head: "abc€", Tail: "€€xy", Truncated: true, tailMidLine: true}},
		{"4-byte characters", "😀😀😀😀😀", Limits{HeadBytes: 6, TailBytes: 6}, Stream{Bytes: 20, Lines: 1, Head: "😀", Tail: "😀", Truncated: true, tailMidLine: true}},
		// Line-aware previews: the head ends after a newline, the tail
		// starts after one.
		{"lines", "aa\nbb\ncc\ndd\nee\nff\n", small, Stream{Bytes: 18, Lines: 6, Head: "aa\nbb\n", Tail: "ee\nff\n", Truncated: true}},
		{"lines without a final newline", "aa\nbb\ncc\ndd\nee\nfff", small, Stream{Bytes: 18, Lines: 6, Head: "aa\nbb\n", Tail: "ee\nfff", Truncated: true}},
		{"tail after a newline at its edge", "aa\nbb\ncc\ndd\neeeeeee", small, Stream{Bytes: 19, Lines: 5, Head: "aa\nbb\n", Tail: "eeeeeee", Truncated: true}},
		{"CRLF", "aa\r\nbb\r\ncc\r\ndd\r\nee\r\n", small, Stream{Bytes: 20, Lines: 5, Head: "aa\r\nbb\r\n", Tail: "dd\r\nee\r\n", Truncated: true}},
		{"first line longer than the head", "0123456789\nab\ncd\nef\nghijkl\n", small, Stream{Bytes: 27, Lines: 5, Head: "01234567", Tail: "ghijkl\n", Truncated: true}},
		{"last line longer than the tail", "ab\ncd\nef\n0123456789\n", small, Stream{Bytes: 20, Lines: 4, Head: "ab\ncd\n", Tail: "3456789\n", Truncated: true, tailMidLine: true}},
		{"multibyte at the cut", "é\n€€€€€€€€\n€\n", small, Stream{Bytes: 32, Lines: 3, Head: "é\n", Tail: "€\n", Truncated: true}},
		{"whole, split at a line", "aa\nbb\ncc\ndd\ne", small, Stream{Bytes: 13, Lines: 5, Head: "aa\nbb\n", Tail: "cc\ndd\ne"}},
		{"NUL is binary", "ab\x00cd", small, Stream{Bytes: 5, Lines: 1, Binary: true, Truncated: true}},
		{"invalid UTF-8 is binary", "ab\xffcd", small, Stream{Bytes: 5, Lines: 1, Binary: true, Truncated: true}},
		{"redacted", "key=hunter22\n", Limits{HeadBytes: 64}, Stream{Bytes: 19, Lines: 1, Head: "key=[REDACTED:tok]\n"}},
		{"no previews", "abc", Limits{HeadBytes: -1, TailBytes: -1}, Stream{Bytes: 3, Lines: 1, Truncated: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, sizes := range [][]int{{1 << 20}, {1}, {3, 1, 2}} {
				got := captureAll(t, red, tt.lim, []byte(tt.in), sizes)
				tt.want.SHA256 = sha(red.Redact([]byte(tt.in)))
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("writes of %v: got %+v; want %+v", sizes, got, tt.want)
				}
			}
		})
	}
}

// TestCaptureLargeStream covers the stream sizes where hashing moves to its
// own goroutine: the hash is still of the whole redacted stream, in order,
// and the goroutine is gone after the flush.
func TestCaptureLargeStream(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	red, err := newRedactor(map[string][]byte{"k": []byte("secret-value-0001")})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{asyncHashAfter - 1, asyncHashAfter, asyncHashAfter + hashBufSize*hashBuffers*3 + 17, 9 << 20} {
		in := textChunk(n)
		copy(in[n/2:], "secret-value-0001")
		got := captureAll(t, red, previews, in, []int{1000, 65536, 1, 300000})
		full := red.Redact(in)
		if got.Bytes != int64(len(full)) || got.SHA256 != sha(full) {
			t.Errorf("%d bytes in: got %d bytes, sha %s; want %d, %s", n, got.Bytes, got.SHA256, len(full), sha(full))
		}
	}
}

// FuzzCapture checks the STREAM invariants for any input and chunking:
// counts and hash describe the whole redacted stream, previews are valid
// UTF-8 taken from its two ends without overlap.
func FuzzCapture(f *testing.F) {
	f.Add([]byte("hello\nworld\n"), []byte{3}, uint8(4), uint8(4))
	f.Add([]byte("€😀€😀\x00€"), []byte{1, 2}, uint8(5), uint8(3))
	f.Add([]byte("x secret1 secret1 y"), []byte{7}, uint8(200), uint8(0))
	red, err := newRedactor(map[string][]byte{"s": []byte("secret1")})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in, chunks []byte, head, tail uint8) {
		sizes := []int{}
		for _, c := range chunks {
			sizes = append(sizes, int(c))
		}
		if len(sizes) == 0 {
			sizes = []int{len(in)}
		}
		got := captureAll(t, red, Limits{HeadBytes: int(head) - 1, TailBytes: int(tail) - 1}, in, sizes)
		full := red.Redact(in)
		if got.Bytes != int64(len(full)) || got.SHA256 != sha(full) {
			t.Fatalf("got %d bytes, sha %s; want %d, %s", got.Bytes, got.SHA256, len(full), sha(full))
		}
		wantLines := int64(bytes.Count(full, []byte("\n")))
		if len(full) > 0 && full[len(full)-1] != '\n' {
			wantLines++
		}
		if got.Lines != wantLines {
			t.Errorf("got %d lines; want %d", got.Lines, wantLines)
		}
		if !utf8.ValidString(got.Head) || !utf8.ValidString(got.Tail) {
			t.Errorf("previews %q, %q are not valid UTF-8", got.Head, got.Tail)
		}
		if !bytes.HasPrefix(full, []byte(got.Head)) || !bytes.HasSuffix(full, []byte(got.Tail)) {
			t.Errorf("previews %q, %q are not the ends of %q", got.Head, got.Tail, full)
		}
		if n := len(got.Head) + len(got.Tail); n > len(full) || got.Truncated != (n < len(full)) {
			t.Errorf("head+tail = %d bytes of %d, truncated %v", n, len(full), got.Truncated)
		}
		// Line-aware cuts: a cut preview breaks at a newline unless one
		// line is longer than it.
		if h := got.Head; got.Truncated && h != "" && !strings.HasSuffix(h, "\n") {
			if i := bytes.IndexByte(full, '\n'); strings.Contains(h, "\n") || i >= 0 && i < int(head)-1 {
				t.Errorf("head %q ends inside a line, though a newline of %q is within its %d bytes", h, full, int(head)-1)
			}
		}
		if tl := got.Tail; got.Truncated && tl != "" {
			at := len(full) - len(tl)
			if full[at-1] != '\n' && strings.Contains(tl[:len(tl)-1], "\n") {
				t.Errorf("tail %q starts inside a line of %q", tl, full)
			}
			if i := bytes.LastIndexByte(full[:len(full)-1], '\n'); full[at-1] != '\n' && i >= len(full)-(int(tail)-1)-1 && !got.tailMidLine {
				t.Errorf("tail %q starts inside a line though a newline is at %d", tl, i)
			}
		}
		if got.Binary != (bytes.IndexByte(full, 0) >= 0 || !utf8.Valid(full)) && len(full) <= int(head)-1 {
			t.Errorf("binary = %v for whole-stream head %q", got.Binary, full)
		}
	})
}

// The RSS test runs this helper in a child process: it pushes
// GATEWAY_PUMP_BYTES through one spooled, redacting capture and prints its
// peak RSS (VmHWM) in KiB.
func TestPumpHelper(t *testing.T) {
	n, err := strconv.ParseInt(os.Getenv("GATEWAY_PUMP_BYTES"), 10, 64)
	if err != nil {
		t.Skip("helper process for TestCaptureRSS; set GATEWAY_PUMP_BYTES to run it")
	}
	secrets := map[string][]byte{}
	for i := range 10 {
		secrets[fmt.Sprintf("k%d", i)] = []byte(fmt.Sprintf("secret-value-%04d", i))
	}
	red, err := newRedactor(secrets)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := OpenSpool(os.Getenv("GATEWAY_PUMP_DIR"), testSpoolOptions)
	if err != nil {
		t.Fatal(err)
	}
	act := sp.Begin("bench", "local")
	c := act.Capture("stdout", red, previews)
	chunk := textChunk(32 << 10)
	start := time.Now()
	for sent := int64(0); sent < n; sent += int64(len(chunk)) {
		c.Write(chunk[:min(int64(len(chunk)), n-sent)])
	}
	act.Finish()
	sum := c.Summary()
	if sum.Bytes < n {
		t.Fatalf("got %d bytes; want at least %d", sum.Bytes, n)
	}
	fmt.Printf("bytes=%d seconds=%.2f vmhwm_kib=%d\n", sum.Bytes, time.Since(start).Seconds(), vmHWM(t))
}

func vmHWM(t testing.TB) int64 {
	n, err := proc.Memory(0, "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	return n >> 10
}

// textChunk makes log-like text with a secret-like near miss per line.
func textChunk(n int) []byte {
	rng := rand.New(rand.NewPCG(7, 11))
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, "2026-01-02T03:04:05Z level=info id=%08x msg=\"request done\" secret-value-x%03d ok\n", rng.Uint32(), rng.IntN(1000))
	}
	return b.Bytes()[:n]
}

// TestCaptureRSS proves in real processes that capture memory does not
// grow with the stream: 1 GiB leaves the peak RSS where 10 MiB does.
func TestCaptureRSS(t *testing.T) {
	if testing.Short() {
		t.Skip("pushes 1 GiB through a capture")
	}
	peak := func(n int64) int64 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPumpHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), "GATEWAY_PUMP_BYTES="+strconv.FormatInt(n, 10), "GATEWAY_PUMP_DIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("helper: %v\n%s", err, out)
		}
		var bytes, kib int64
		var secs float64
		i := strings.Index(string(out), "bytes=")
		if i < 0 {
			t.Fatalf("helper printed no figures:\n%s", out)
		}
		if _, err := fmt.Sscanf(string(out[i:]), "bytes=%d seconds=%g vmhwm_kib=%d", &bytes, &secs, &kib); err != nil {
			t.Fatalf("parse %q: %v", out, err)
		}
		t.Logf("%d bytes in %.2fs: VmHWM %d KiB", bytes, secs, kib)
		return kib
	}
	small := peak(10 << 20)
	large := peak(1 << 30)
	// Generous for GC timing noise, far below the 1 GiB that went through.
	if large > small+16<<10 {
		t.Errorf("peak RSS after 1 GiB = %d KiB; after 10 MiB = %d KiB; want within 16 MiB", large, small)
	}
}

// onlyReader hides WriterTo so io.Copy moves 32 KiB chunks, as a producer
// copying a network stream does.
type onlyReader struct{ io.Reader }

// benchSecrets returns n secrets as a gateway holds them: 32-character
// tokens and, the last, an OpenSSH Ed25519 private key, whose lines and
// their encodings are patterns of their own.
func benchSecrets(n int) map[string][]byte {
	rng := rand.New(rand.NewPCG(3, 5))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-"
	secrets := map[string][]byte{}
	for i := range n - 1 {
		v := make([]byte, 32)
		for j := range v {
			v[j] = alphabet[rng.IntN(len(alphabet))]
		}
		secrets[fmt.Sprintf("secret-%d", i)] = v
	}
	if n == 0 {
		return secrets
	}
	der := make([]byte, 294)
	for i := range der {
		der[i] = byte(rng.Uint32())
	}
	key := "-----BEGIN OPENSSH PRIVATE KEY-----\n"
	for body := base64.StdEncoding.EncodeToString(der); len(body) > 0; {
		line := body[:min(70, len(body))]
		body = body[len(line):]
		key += line + "\n"
	}
	secrets["ssh-key"] = []byte(key + "-----END OPENSSH PRIVATE KEY-----\n")
	return secrets
}

// reportCPU adds cpu-MB/s, throughput per CPU second: on a machine shared
// with other work it says more than the wall-clock MB/s. Without /proc it
// adds nothing.
func reportCPU(b *testing.B, bytesPerOp int, run func()) {
	start, err := proc.CPU(os.Getpid())
	run()
	end, _ := proc.CPU(os.Getpid())
	if err == nil && end > start {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/1e6/(end-start).Seconds(), "cpu-MB/s")
	}
}

// BenchmarkCapture measures capture + redaction throughput against io.Copy
// to io.Discard in the same run.
func BenchmarkCapture(b *testing.B) {
	data := textChunk(8 << 20)
	b.Run("io.Copy-Discard", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		reportCPU(b, len(data), func() {
			for b.Loop() {
				io.Copy(io.Discard, onlyReader{bytes.NewReader(data)})
			}
		})
	})
	for _, n := range []int{0, 10, 100} {
		red, err := newRedactor(benchSecrets(n))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("secrets=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			c := newCapture(red, previews, nil)
			reportCPU(b, len(data), func() {
				for b.Loop() {
					io.Copy(c, onlyReader{bytes.NewReader(data)})
				}
				c.flush()
			})
		})
		b.Run(fmt.Sprintf("spooled/secrets=%d", n), func(b *testing.B) {
			sp, err := OpenSpool(b.TempDir(), testSpoolOptions)
			if err != nil {
				b.Fatal(err)
			}
			act := sp.Begin("bench", "local")
			c := act.Capture("stdout", red, previews)
			b.SetBytes(int64(len(data)))
			reportCPU(b, len(data), func() {
				for b.Loop() {
					io.Copy(c, onlyReader{bytes.NewReader(data)})
				}
			})
			act.Finish()
		})
	}
}

// BenchmarkRedact measures the redactor alone on 32 KiB writes, also with
// secrets that every line of the text nearly matches ("secret-value-x123"
// against "secret-value-0042").
func BenchmarkRedact(b *testing.B) {
	data := textChunk(8 << 20)
	nearMiss := map[string][]byte{}
	for i := range 100 {
		nearMiss[fmt.Sprintf("k%d", i)] = []byte(fmt.Sprintf("secret-value-%04d", i))
	}
	for _, bc := range []struct {
		name    string
		secrets map[string][]byte
	}{{"secrets=10", benchSecrets(10)}, {"secrets=100", benchSecrets(100)}, {"near-miss/secrets=100", nearMiss}} {
		red, err := newRedactor(bc.secrets)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			w := red.NewStream(func([]byte) {})
			reportCPU(b, len(data), func() {
				for b.Loop() {
					for off := 0; off < len(data); off += 32 << 10 {
						w.Write(data[off:min(off+32<<10, len(data))])
					}
				}
			})
		})
	}
}

// TestCaptureRecent: Recent is the stream's last bytes, at their offset,
// however the writes fell on the tail's ring, and at most what was asked.
func TestCaptureRecent(t *testing.T) {
	red, err := newRedactor(nil)
	if err != nil {
		t.Fatal(err)
	}
	stream := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	for _, c := range []struct {
		name   string
		writes []int // lengths of the writes, in order
		n      int
	}{
		{"nothing", nil, 5},
		{"fewer than asked", []int{3}, 5},
		{"ring not full", []int{2, 3}, 4},
		{"ring full, one write", []int{36}, 8},
		{"ring wrapped", []int{5, 7, 11, 13}, 8},
		{"ask more than the ring", []int{9, 9, 9, 9}, 100},
		{"ask none", []int{10}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := newCapture(red, Limits{HeadBytes: 4, TailBytes: 8}, nil)
			end := 0
			for _, n := range c.writes {
				cp.Write(stream[end : end+n])
				end += n
			}
			cp.Flush()
			off, got := cp.Recent(c.n)
			want := stream[max(0, end-min(c.n, 9)):end] // the ring holds the tail and one byte more
			if off != int64(end-len(want)) || string(got) != string(want) {
				t.Errorf("Recent(%d) = %d, %q; want %d, %q", c.n, off, got, end-len(want), want)
			}
		})
	}
}
