package sshexec

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/sshtest"
	"github.com/actiongw/actiongw/policy"
)

// sftpEnv is an sshd with a pool and a directory the login user owns,
// resolved (the server reports resolved paths).
type sftpEnv struct {
	s   *sshtest.Server
	p   *Pool
	tg  *Target
	dir string
}

func newSFTPEnv(t *testing.T) *sftpEnv {
	t.Helper()
	s := sshtest.Start(t, sshtest.Options{})
	dir, err := filepath.EvalSymlinks(s.UserDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return &sftpEnv{s: s, p: newPool(t), tg: target(s), dir: dir}
}

// transferCtx bounds one transfer of a test.
func transferCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func (e *sftpEnv) lease(t *testing.T) *Lease {
	t.Helper()
	l, err := e.p.Acquire(transferCtx(t), e.tg, forever)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return l
}

func (e *sftpEnv) download(t *testing.T, req DownloadRequest) (*TransferResult, error) {
	t.Helper()
	return e.lease(t).Download(transferCtx(t), req)
}

func (e *sftpEnv) upload(t *testing.T, req UploadRequest) (*TransferResult, error) {
	t.Helper()
	return e.lease(t).Upload(transferCtx(t), req)
}

// temps lists the upload temporary files left in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".actiongw-") {
			left = append(left, e.Name())
		}
	}
	return left
}

func sum(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:]) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{1})
	r.Read(b)
	return b
}

func TestSFTPRoundTrip(t *testing.T) {
	e := newSFTPEnv(t)
	for _, tc := range []struct {
		name    string
		content []byte
		mode    os.FileMode
		want    os.FileMode
	}{
		{"text", []byte("listen 8080\nworkers 4\n"), 0, 0o644},
		{"binary", randomBytes(3<<20 + 17), 0o600, 0o600},
		{"empty", nil, 0o755, 0o755},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(e.dir, tc.name+".dat")
			up, err := e.upload(t, UploadRequest{Path: dest, R: bytes.NewReader(tc.content), Size: int64(len(tc.content)), Mode: tc.mode})
			if err != nil {
				t.Fatalf("upload: %v", err)
			}
			got, err := os.ReadFile(dest)
			if err != nil || !bytes.Equal(got, tc.content) {
				t.Fatalf("remote file: got %d bytes (%v); want the %d uploaded", len(got), err, len(tc.content))
			}
			want := TransferResult{Path: dest, Size: int64(len(tc.content)), Mode: tc.want, Bytes: int64(len(tc.content)), SHA256: sum(tc.content)}
			if up.Path != want.Path || up.Size != want.Size || up.Mode != want.Mode || up.Bytes != want.Bytes || up.SHA256 != want.SHA256 {
				t.Errorf("upload result: got %+v; want %+v", up, want)
			}
			if fi, _ := os.Stat(dest); fi.Mode().Perm() != tc.want {
				t.Errorf("remote mode: got %v; want %v", fi.Mode().Perm(), tc.want)
			}

			var buf bytes.Buffer
			down, err := e.download(t, DownloadRequest{Path: dest, W: &buf})
			if err != nil {
				t.Fatalf("download: %v", err)
			}
			if !bytes.Equal(buf.Bytes(), tc.content) {
				t.Fatalf("download: got %d bytes; want the %d uploaded", buf.Len(), len(tc.content))
			}
			if down.Path != want.Path || down.Size != want.Size || down.Mode != want.Mode || down.Bytes != want.Bytes || down.SHA256 != want.SHA256 || down.Truncated {
				t.Errorf("download result: got %+v; want %+v", down, want)
			}
			if !down.ModTime.Equal(up.ModTime) {
				t.Errorf("download mtime: got %v; want %v", down.ModTime, up.ModTime)
			}
			if left := temps(t, e.dir); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
		})
	}
}

func TestSFTPDownloadMaxBytes(t *testing.T) {
	e := newSFTPEnv(t)
	content := randomBytes(1 << 20)
	src := filepath.Join(e.dir, "big")
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name          string
		max           int64
		wantBytes     int64
		wantTruncated bool
	}{
		{"under", 1000, 1000, true},
		{"a packet and a bit", 40000, 40000, true},
		{"exact", 1 << 20, 1 << 20, false},
		{"none", 0, 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			res, err := e.download(t, DownloadRequest{Path: src, W: &buf, MaxBytes: tc.max})
			if err != nil {
				t.Fatal(err)
			}
			if res.Bytes != tc.wantBytes || res.Truncated != tc.wantTruncated || res.Size != 1<<20 {
				t.Errorf("got bytes %d truncated %v size %d; want %d %v %d", res.Bytes, res.Truncated, res.Size, tc.wantBytes, tc.wantTruncated, 1<<20)
			}
			if !bytes.Equal(buf.Bytes(), content[:tc.wantBytes]) || res.SHA256 != sum(content[:tc.wantBytes]) {
				t.Errorf("got %d bytes, sha256 %s; want the file's first %d", buf.Len(), res.SHA256, tc.wantBytes)
			}
		})
	}
}

// TestSFTPRefusals sends what a prompt-injected agent might: paths that
// are not files, NUL bytes, uploads over existing files or links, and
// content past the limit. Nothing may be written.
func TestSFTPRefusals(t *testing.T) {
	e := newSFTPEnv(t)
	existing := filepath.Join(e.dir, "existing")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(e.dir, "link")
	if err := os.Symlink(existing, link); err != nil {
		t.Fatal(err)
	}
	var (
		pathErr   *PathError
		existsErr *ExistsError
		tooLarge  *TooLargeError
	)
	uploads := []struct {
		name string
		req  UploadRequest
		want any
	}{
		{"existing without overwrite", UploadRequest{Path: existing, Size: -1}, &existsErr},
		{"symlink destination", UploadRequest{Path: link, Size: -1, Overwrite: true}, &pathErr},
		{"directory destination", UploadRequest{Path: e.dir, Size: -1, Overwrite: true}, &pathErr},
		{"no file name", UploadRequest{Path: e.dir + "/", Size: -1}, &pathErr},
		{"dot dot", UploadRequest{Path: e.dir + "/..", Size: -1}, &pathErr},
		{"NUL", UploadRequest{Path: existing + "\x00x", Size: -1, Overwrite: true}, &pathErr},
		{"known size over limit", UploadRequest{Path: filepath.Join(e.dir, "new1"), Size: 11, MaxBytes: 10}, &tooLarge},
		{"unknown size over limit", UploadRequest{Path: filepath.Join(e.dir, "new2"), Size: -1, MaxBytes: 10}, &tooLarge},
	}
	for _, tc := range uploads {
		t.Run("upload "+tc.name, func(t *testing.T) {
			tc.req.R = strings.NewReader("new content")
			res, err := e.upload(t, tc.req)
			if !errors.As(err, tc.want) {
				t.Fatalf("got %+v, %v; want %T", res, err, tc.want)
			}
			if got, _ := os.ReadFile(existing); string(got) != "old" {
				t.Errorf("existing file: got %q; want %q", got, "old")
			}
			for _, name := range []string{"new1", "new2"} {
				if _, err := os.Lstat(filepath.Join(e.dir, name)); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s: got %v; want it absent", name, err)
				}
			}
			if left := temps(t, e.dir); len(left) > 0 {
				t.Errorf("temporary files left: %q", left)
			}
		})
	}
	downloads := []struct {
		name string
		path string
		want any
	}{
		{"directory", e.dir, &pathErr},
		{"device", "/dev/zero", &pathErr},
		{"NUL", existing + "\x00", &pathErr},
		{"missing", filepath.Join(e.dir, "missing"), &fs.ErrNotExist},
	}
	for _, tc := range downloads {
		t.Run("download "+tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			res, err := e.download(t, DownloadRequest{Path: tc.path, W: &buf})
			if target, ok := tc.want.(*error); ok {
				if !errors.Is(err, *target) {
					t.Fatalf("got %+v, %v; want %v", res, err, *target)
				}
			} else if !errors.As(err, tc.want) {
				t.Fatalf("got %+v, %v; want %T", res, err, tc.want)
			}
			if res != nil || buf.Len() > 0 {
				t.Errorf("got result %+v and %d bytes; want none", res, buf.Len())
			}
		})
	}

	t.Run("overwrite replaces", func(t *testing.T) {
		if _, err := e.upload(t, UploadRequest{Path: existing, R: strings.NewReader("new"), Size: 3, Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(existing); string(got) != "new" {
			t.Errorf("got %q; want %q", got, "new")
		}
	})
}

// TestSFTPSymlinkEscape: a link inside the allowed directory that leads out
// of it is refused in both directions, since Check sees the resolved path.
func TestSFTPSymlinkEscape(t *testing.T) {
	e := newSFTPEnv(t)
	allowed, outside := filepath.Join(e.dir, "allowed"), filepath.Join(e.dir, "outside")
	for _, d := range []string{allowed, outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil { // the login user writes there
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("not for the agent"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"file-link": secret, "dir-link": outside} {
		if err := os.Symlink(to, filepath.Join(allowed, link)); err != nil {
			t.Fatal(err)
		}
	}
	paths := &policy.Paths{Target: "test", Allow: []string{allowed + "/**"}}
	var denied *policy.DeniedError

	var buf bytes.Buffer
	for _, p := range []string{allowed + "/file-link", allowed + "/dir-link/secret", allowed + "/../outside/secret"} {
		res, err := e.download(t, DownloadRequest{Path: p, Check: paths.Check, W: &buf})
		if !errors.As(err, &denied) || res != nil || buf.Len() > 0 {
			t.Errorf("download %s: got %+v, %v, %d bytes; want *policy.DeniedError and nothing", p, res, err, buf.Len())
		}
	}
	for _, p := range []string{allowed + "/dir-link/planted", allowed + "/../outside/planted"} {
		res, err := e.upload(t, UploadRequest{Path: p, Check: paths.Check, R: strings.NewReader("x"), Size: 1})
		if !errors.As(err, &denied) || res != nil {
			t.Errorf("upload %s: got %+v, %v; want *policy.DeniedError", p, res, err)
		}
	}
	ents, _ := os.ReadDir(outside)
	if len(ents) != 1 {
		t.Errorf("outside holds %d entries; want only the secret", len(ents))
	}
	// The allowed directory itself still works.
	if _, err := e.upload(t, UploadRequest{Path: allowed + "/ok", Check: paths.Check, R: strings.NewReader("x"), Size: 1}); err != nil {
		t.Errorf("upload inside: %v", err)
	}
}

// cancelAfterWriter cancels its context once after bytes have passed.
type cancelAfterWriter struct {
	after  int64
	n      int64
	cancel func()
}

func (w *cancelAfterWriter) Write(p []byte) (int, error) {
	if w.n += int64(len(p)); w.n >= w.after {
		w.cancel()
	}
	return len(p), nil
}

// cancelAfterReader gives zeros forever, cancelling its context once after
// bytes have passed.
type cancelAfterReader struct {
	after  int64
	n      int64
	cancel func()
}

func (r *cancelAfterReader) Read(p []byte) (int, error) {
	if r.n += int64(len(p)); r.n >= r.after {
		r.cancel()
	}
	clear(p)
	return len(p), nil
}

// TestSFTPCancel cancels transfers midway: the upload's temporary file is
// gone and its destination unchanged, and the next transfer on the same
// connection works at once.
func TestSFTPCancel(t *testing.T) {
	e := newSFTPEnv(t)
	src := filepath.Join(e.dir, "src")
	content := randomBytes(32 << 20)
	if err := os.WriteFile(src, content, 0o644); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(e.dir, "dest")
	if err := os.WriteFile(dest, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stopped by the test")

	t.Run("download", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(transferCtx(t))
		w := &cancelAfterWriter{after: 1 << 20, cancel: func() { cancel(stop) }}
		res, err := e.lease(t).Download(ctx, DownloadRequest{Path: src, W: w})
		if !errors.Is(err, stop) {
			t.Fatalf("got %v; want the cancel's cause", err)
		}
		if res == nil || res.Bytes < 1<<20 || res.Bytes >= int64(len(content)) || res.Truncated {
			t.Errorf("got %+v; want a partial result", res)
		}
	})
	t.Run("upload", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(transferCtx(t))
		r := &cancelAfterReader{after: 1 << 20, cancel: func() { cancel(stop) }}
		res, err := e.lease(t).Upload(ctx, UploadRequest{Path: dest, R: r, Size: -1, Overwrite: true})
		if !errors.Is(err, stop) {
			t.Fatalf("got %+v, %v; want the cancel's cause", res, err)
		}
		if got, _ := os.ReadFile(dest); string(got) != "old" {
			t.Errorf("destination: got %d bytes; want %q", len(got), "old")
		}
		if left := temps(t, e.dir); len(left) > 0 {
			t.Errorf("temporary files left: %q", left)
		}
	})
	t.Run("next", func(t *testing.T) {
		var buf bytes.Buffer
		if res, err := e.download(t, DownloadRequest{Path: src, W: &buf}); err != nil || res.SHA256 != sum(content) {
			t.Fatalf("download after cancels: %+v, %v", res, err)
		}
		if _, err := e.upload(t, UploadRequest{Path: dest, R: strings.NewReader("new"), Size: 3, Overwrite: true}); err != nil {
			t.Fatalf("upload after cancels: %v", err)
		}
		if got := logins(e.s); got != 1 {
			t.Errorf("logins: got %d; want 1 (the cancels kept the connection)", got)
		}
	})
}

// TestSFTPLarge moves 256 MiB both ways through readers and writers that
// hold no copy, checking the hashes.
func TestSFTPLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("256 MiB both ways")
	}
	e := newSFTPEnv(t)
	const size = 256 << 20
	h := sha256.New()
	src := io.TeeReader(io.LimitReader(rand.NewChaCha8([32]byte{2}), size), h)
	dest := filepath.Join(e.dir, "large")
	up, err := e.upload(t, UploadRequest{Path: dest, R: src, Size: size})
	if err != nil {
		t.Fatal(err)
	}
	want := hex.EncodeToString(h.Sum(nil))
	if up.Bytes != size || up.Size != size || up.SHA256 != want {
		t.Fatalf("upload: got %+v; want %d bytes, sha256 %s", up, size, want)
	}
	down, err := e.download(t, DownloadRequest{Path: dest})
	if err != nil {
		t.Fatal(err)
	}
	if down.Bytes != size || down.SHA256 != want {
		t.Fatalf("download: got %+v; want %d bytes, sha256 %s", down, size, want)
	}
}

// benchSize is the file the SFTP benchmarks move; SSHEXEC_SFTP_BYTES sets
// a smaller one for profiling.
func benchSize() int64 {
	if v, err := strconv.ParseInt(os.Getenv("SSHEXEC_SFTP_BYTES"), 10, 64); err == nil && v > 0 {
		return v
	}
	return 1 << 30
}

// sftpBench is an sshd, a pool on it, and how to run OpenSSH's sftp client
// against it with the same key and known_hosts.
type sftpBench struct {
	*sftpEnv
	local string // a directory of this process for local files
	key   string
}

func newSFTPBench(b *testing.B) *sftpBench {
	s := sshtest.Start(b, sshtest.Options{})
	dir, err := filepath.EvalSymlinks(s.UserDir(b))
	if err != nil {
		b.Fatal(err)
	}
	p := NewPool(nil)
	b.Cleanup(func() { p.Close() })
	e := &sftpBench{sftpEnv: &sftpEnv{s: s, p: p, tg: target(s), dir: dir}, local: b.TempDir()}
	e.key = filepath.Join(e.local, "id")
	if err := os.WriteFile(e.key, s.ClientKey, 0o600); err != nil {
		b.Fatal(err)
	}
	return e
}

// openssh runs OpenSSH's sftp client with one batch command.
func (e *sftpBench) openssh(b *testing.B, command string) {
	cmd := exec.Command("sftp", "-q", "-F", "/dev/null", "-i", e.key, "-P", strconv.Itoa(e.s.Port),
		"-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "UserKnownHostsFile="+e.s.KnownHosts,
		"-o", "HostKeyAlgorithms=ssh-ed25519", "-b", "-", e.s.User+"@"+e.s.Host)
	cmd.Stdin = strings.NewReader(command + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("sftp %s: %v: %s", command, err, out)
	}
}

func writeRandomFile(b *testing.B, name string, size int64) {
	f, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(f, io.LimitReader(rand.NewChaCha8([32]byte{3}), size)); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.Chmod(name, 0o644); err != nil {
		b.Fatal(err)
	}
}

// reportRatio reports both clients' MB/s and ours over theirs.
func reportRatio(b *testing.B, size int64, ours, theirs time.Duration) {
	n := float64(b.N) * float64(size) / 1e6
	b.ReportMetric(n/ours.Seconds(), "sshexec-MB/s")
	b.ReportMetric(n/theirs.Seconds(), "openssh-MB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
}

// BenchmarkSFTPDownload downloads a file of 1 GiB into a local file with
// Lease.Download and with OpenSSH's sftp client (`get`) from the same
// sshd, alternating the two in each iteration so that both see the same
// machine load, and reports each one's MB/s and their ratio.
func BenchmarkSFTPDownload(b *testing.B) {
	size := benchSize()
	e := newSFTPBench(b)
	src := filepath.Join(e.dir, "src")
	writeRandomFile(b, src, size)
	oursPath, theirsPath := filepath.Join(e.local, "ours"), filepath.Join(e.local, "theirs")
	var ours, theirs time.Duration
	for b.Loop() {
		start := time.Now()
		f, err := os.Create(oursPath)
		if err != nil {
			b.Fatal(err)
		}
		l, err := e.p.Acquire(context.Background(), e.tg, forever)
		if err != nil {
			b.Fatal(err)
		}
		res, err := l.Download(context.Background(), DownloadRequest{Path: src, W: f})
		if err != nil || res.Bytes != size {
			b.Fatalf("got %+v, %v", res, err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(start)

		start = time.Now()
		e.openssh(b, "get "+src+" "+theirsPath)
		theirs += time.Since(start)
	}
	reportRatio(b, size, ours, theirs)
}

// BenchmarkSFTPUpload uploads a local file of 1 GiB with Lease.Upload and
// with OpenSSH's sftp client (`put`) to the same sshd, as
// BenchmarkSFTPDownload does.
func BenchmarkSFTPUpload(b *testing.B) {
	size := benchSize()
	e := newSFTPBench(b)
	src := filepath.Join(e.local, "src")
	writeRandomFile(b, src, size)
	var ours, theirs time.Duration
	for b.Loop() {
		start := time.Now()
		f, err := os.Open(src)
		if err != nil {
			b.Fatal(err)
		}
		l, err := e.p.Acquire(context.Background(), e.tg, forever)
		if err != nil {
			b.Fatal(err)
		}
		res, err := l.Upload(context.Background(), UploadRequest{Path: filepath.Join(e.dir, "ours"), R: f, Size: size, Overwrite: true})
		f.Close()
		if err != nil || res.Bytes != size {
			b.Fatalf("got %+v, %v", res, err)
		}
		ours += time.Since(start)

		start = time.Now()
		e.openssh(b, "put "+src+" "+filepath.Join(e.dir, "theirs"))
		theirs += time.Since(start)
	}
	reportRatio(b, size, ours, theirs)
}

// TestSFTPWedged freezes the server in the middle of transfers and cancels
// them: they end once the keepalive finds the connection dead, say that
// the temporary file may remain (nothing could remove it), and the next
// transfer works on a new connection.
func TestSFTPWedged(t *testing.T) {
	e := newSFTPEnv(t)
	e.tg.Keepalive = 300 * time.Millisecond
	src := filepath.Join(e.dir, "src")
	if err := os.WriteFile(src, randomBytes(32<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stopped by the test")
	freezeAndCancel := func(cancel context.CancelCauseFunc) func() {
		return func() { e.s.Freeze(); cancel(stop) }
	}

	t.Run("download", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(transferCtx(t))
		var once sync.Once
		w := &cancelAfterWriter{after: 1 << 20, cancel: func() { once.Do(freezeAndCancel(cancel)) }}
		if _, err := e.lease(t).Download(ctx, DownloadRequest{Path: src, W: w}); !errors.Is(err, stop) {
			t.Fatalf("got %v; want the cancel's cause", err)
		}
	})
	t.Run("upload", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(transferCtx(t))
		var once sync.Once
		r := &cancelAfterReader{after: 1 << 20, cancel: func() { once.Do(freezeAndCancel(cancel)) }}
		_, err := e.lease(t).Upload(ctx, UploadRequest{Path: filepath.Join(e.dir, "dest"), R: r, Size: -1})
		if !errors.Is(err, stop) || !strings.Contains(err.Error(), "may remain") {
			t.Fatalf("got %v; want the cancel's cause and that the temporary file may remain", err)
		}
	})
	if _, err := e.upload(t, UploadRequest{Path: filepath.Join(e.dir, "after"), R: strings.NewReader("x"), Size: 1}); err != nil {
		t.Fatalf("upload after the freezes: %v", err)
	}
}
