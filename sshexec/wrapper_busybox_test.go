//go:build linux

package sshexec

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

// busyboxPath is a directory whose every tool the wrapper uses is
// busybox's (Alpine, OpenWrt).
func busyboxPath(t *testing.T) string {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		testenv.Missing(t, "busybox", "install busybox-static (apt-get install busybox-static), "+testenv.Setup)
	}
	dir := t.TempDir()
	for _, tool := range []string{"sh", "head", "wc", "timeout", "mkfifo", "mktemp", "cat", "rm", "kill", "sleep", "grep", "sed", "ps", "awk", "tr"} {
		if err := os.Symlink(bb, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startBusyboxWrapper runs req's wrapper in busybox's sh with only
// busybox's tools, its stdin the read end of a pipe the caller writes.
// done is closed when it ended; *werr is then its error.
func startBusyboxWrapper(t *testing.T, req *Request, deadline time.Duration) (w *os.File, done <-chan struct{}, werr *error) {
	path := busyboxPath(t)
	r, w, perr := os.Pipe()
	if perr != nil {
		t.Fatal(perr)
	}
	cmd := exec.Command(filepath.Join(path, "sh"), "-c", wrap(req, newRunID(), armedStdin, deadline, time.Second, false))
	cmd.Env = []string{"PATH=" + path, "TMPDIR=" + t.TempDir()}
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if serr := cmd.Start(); serr != nil {
		t.Fatal(serr)
	}
	r.Close()
	ended, err := make(chan struct{}), new(error)
	go func() {
		*err = cmd.Wait()
		close(ended)
	}()
	t.Cleanup(func() {
		w.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-ended
	})
	return w, ended, err
}

// drained waits until the wrapper has read all that is in the pipe, so
// that each write is one read of its own, as a network delivers it.
func drained(t *testing.T, w *os.File) {
	testenv.WaitFor(t, 30*time.Second, "the wrapper to read what was written", func() bool {
		n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ)
		return err != nil || n == 0
	})
}

// TestWrapperStdinBusybox: on a host whose tools are busybox's, a stdin
// larger than one part of the watcher's read arrives whole and in order
// (busybox's head reads ahead of what it was asked for, so a second head
// finds bytes missing), and a stdin of one part that stops arriving fires
// the switch (busybox's timeout sent a TERM that the watcher's head
// ignores).
func TestWrapperStdinBusybox(t *testing.T) {
	t.Run("stdin in many reads", func(t *testing.T) {
		dir := t.TempDir()
		stdin := make([]byte, 600<<10)
		for i := range stdin {
			stdin[i] = byte('a' + i%26)
		}
		w, done, werr := startBusyboxWrapper(t, &Request{Command: "cat > " + filepath.Join(dir, "got"), Stdin: stdin}, 2*time.Second)
		for rest := stdin; len(rest) > 0; {
			part := rest[:min(2000, len(rest))]
			if _, err := w.Write(part); err != nil {
				t.Fatal(err)
			}
			rest = rest[len(part):]
			drained(t, w)
		}
		// Heartbeats until the command ends. (The deadline is short:
		// busybox's timeout leaves a process of its own in a session of
		// its own for that long.)
		giveUp := time.After(60 * time.Second)
		for ended := false; !ended; {
			select {
			case <-done:
				if *werr != nil {
					t.Errorf("the wrapper: %v", *werr)
				}
				ended = true
			case <-time.After(20 * time.Millisecond):
				w.Write([]byte{'.'})
			case <-giveUp:
				t.Fatal("the command did not end in 60 s")
			}
		}
		got, _ := os.ReadFile(filepath.Join(dir, "got"))
		if !bytes.Equal(got, stdin) {
			i := 0
			for i < len(got) && i < len(stdin) && got[i] == stdin[i] {
				i++
			}
			t.Errorf("the command's stdin: %d bytes, first difference at %d; want the %d bytes sent", len(got), i, len(stdin))
		}
	})

	t.Run("stdin stops arriving", func(t *testing.T) {
		dir := t.TempDir()
		w, done, _ := startBusyboxWrapper(t, &Request{Command: "cat > " + filepath.Join(dir, "got") + "; echo ran > " + filepath.Join(dir, "after"), Stdin: make([]byte, 200<<10)}, time.Second)
		if _, err := w.Write(make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the command still waits for its stdin 60 s after it stopped arriving, with a deadline of 1 s")
		}
		if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
			t.Error("the command went on past its stdin; want it stopped")
		}
	})
}
