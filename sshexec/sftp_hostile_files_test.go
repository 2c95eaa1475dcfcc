//go:build linux

package sshexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/policy"
	"golang.org/x/sys/unix"
)

// swapEnv is a directory the rules allow, with a file and a subdirectory,
// and one beside it that they do not, holding a private file of the
// same name in the same layout: what a racer on the host swaps in.
type swapEnv struct {
	*sftpEnv
	allowed, outside string
	paths            *policy.Paths
}

func newSwapEnv(t *testing.T) *swapEnv {
	t.Helper()
	e := &swapEnv{sftpEnv: newSFTPEnv(t)}
	e.allowed, e.outside = filepath.Join(e.dir, "allowed"), filepath.Join(e.dir, "outside")
	for _, d := range []string{e.allowed, e.outside, filepath.Join(e.allowed, "sub"), filepath.Join(e.outside, "sub")} {
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o777); err != nil { // the login user writes there
			t.Fatal(err)
		}
	}
	for _, f := range []string{"f", "sub/f"} {
		if err := os.WriteFile(filepath.Join(e.allowed, f), []byte("public"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(e.outside, f), []byte("not for the agent"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.paths = &policy.Paths{Target: "test", Allow: []string{e.allowed + "/**"}}
	return e
}

// swapAfterCheck is a Check that allows what the rules allow and then,
// as a racer on the host would between the check and the open, replaces
// name (under the allowed directory) with a symlink to its namesake
// outside.
func (e *swapEnv) swapAfterCheck(t *testing.T, name string) func(string) error {
	return func(real string) error {
		if err := e.paths.Check(real); err != nil {
			return err
		}
		link := filepath.Join(e.allowed, name)
		if err := os.RemoveAll(link); err != nil {
			t.Error(err)
		}
		if err := os.Symlink(filepath.Join(e.outside, name), link); err != nil {
			t.Error(err)
		}
		return nil
	}
}

// TestSFTPDownloadSwappedAfterCheck: a file or directory of the checked
// path replaced by a symlink out of the allowed directory after the check
// gives nothing of the file outside.
func TestSFTPDownloadSwappedAfterCheck(t *testing.T) {
	for _, tc := range []struct{ name, swap, path string }{
		{"file", "f", "f"},
		{"directory", "sub", "sub/f"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSwapEnv(t)
			var buf bytes.Buffer
			res, err := e.download(t, DownloadRequest{Path: filepath.Join(e.allowed, tc.path), Check: e.swapAfterCheck(t, tc.swap), W: &buf})
			var pathErr *PathError
			if !errors.As(err, &pathErr) || res != nil || buf.Len() > 0 {
				t.Errorf("got %+v, %v, %q; want a *PathError and nothing read", res, err, buf.String())
			}
		})
	}
}

// TestSFTPUploadSwappedAfterCheck: a directory of the checked destination
// replaced by a symlink out of the allowed directory after the check
// gets nothing written outside, and no temporary file is left there.
func TestSFTPUploadSwappedAfterCheck(t *testing.T) {
	e := newSwapEnv(t)
	res, err := e.upload(t, UploadRequest{Path: filepath.Join(e.allowed, "sub", "planted"), Check: e.swapAfterCheck(t, "sub"),
		R: strings.NewReader("x"), Size: 1})
	var pathErr *PathError
	if !errors.As(err, &pathErr) {
		t.Errorf("got %+v, %v; want a *PathError", res, err)
	}
	ents, err := os.ReadDir(filepath.Join(e.outside, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ent := range ents {
		names = append(names, ent.Name())
	}
	if len(names) != 1 || names[0] != "f" {
		t.Errorf("outside/sub holds %q; want only f", names)
	}
}

// TestSFTPCallServerNeverAnswers: an SFTP call that the server never
// answers (its sftp-server waits in open on a named pipe for a writer, as
// a pipe swapped in between a download's stat and its open makes it) ends
// once ctx has: the server keeps the channel open, so the connection goes,
// and the next transfer works on a new one.
func TestSFTPCallServerNeverAnswers(t *testing.T) {
	e := newSwapEnv(t)
	e.tg.Keepalive = 300 * time.Millisecond
	fifo := filepath.Join(e.allowed, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The server's sftp-server outlives the connection, stuck in its
		// open until a writer comes: this one.
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	ctx, cancel := context.WithTimeout(transferCtx(t), time.Second)
	defer cancel()
	s, err := e.lease(t).startSFTP(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.c.Open(fifo)
		s.end()
		ended <- err
	}()
	select {
	case err := <-ended:
		if err == nil {
			t.Errorf("open of a pipe nobody writes: got no error; want one")
		}
	case <-time.After(time.Minute):
		t.Fatal("the call did not end within a minute of its ctx")
	}
	var buf bytes.Buffer
	if _, err := e.download(t, DownloadRequest{Path: filepath.Join(e.allowed, "f"), W: &buf}); err != nil || buf.String() != "public" {
		t.Errorf("next download: got %q, %v; want %q", buf.String(), err, "public")
	}
}

// TestSFTPDownloadOpenHeldByLease: a download whose open the server cannot
// finish (a write lease on the file, which a process of the login user can
// take, holds every other open until the kernel breaks it at
// lease-break-time, 45 s by default) ends once ctx has, while the lease is
// still breaking.
func TestSFTPDownloadOpenHeldByLease(t *testing.T) {
	e := newSwapEnv(t)
	e.tg.Keepalive = 300 * time.Millisecond
	held := filepath.Join(e.allowed, "f")
	f, err := os.OpenFile(held, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		t.Fatalf("take a write lease: %v", err)
	}
	ctx, cancel := context.WithTimeout(transferCtx(t), time.Second)
	defer cancel()
	var buf bytes.Buffer
	res, err := e.lease(t).Download(ctx, DownloadRequest{Path: held, W: &buf})
	if !errors.Is(err, context.DeadlineExceeded) || res != nil {
		t.Errorf("got %+v, %v; want no result and %v", res, err, context.DeadlineExceeded)
	}
	if got := leaseState(t, f); got != "BREAKING" {
		t.Errorf("lease when the download ended: got %q; want BREAKING (the kernel had not broken it yet)", got)
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETLEASE, unix.F_UNLCK); err != nil {
		t.Error(err)
	}
}

// leaseState is the state /proc/locks gives the lease on f: ACTIVE,
// BREAKING or BREAKER.
func leaseState(t *testing.T, f *os.File) string {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	id := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(locks)) {
		// "1: LEASE  BREAKING  READ  1234 00:2a:5678 0 EOF"
		if fs := strings.Fields(line); len(fs) >= 6 && fs[1] == "LEASE" && fs[5] == id {
			return fs[2]
		}
	}
	return ""
}
