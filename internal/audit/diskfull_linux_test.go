package audit

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAuditDiskFull fills a real (tmpfs) file system under the log: an
// Append fails as a full disk, keeps nothing, leaves the log going, and
// succeeds once there is room.
func TestAuditDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("TestAuditDiskFull needs root (mount)")
		}
		t.Skip("needs root (mount)")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	path := filepath.Join(dir, "audit.jsonl")
	a, err := OpenWith(context.Background(), path, Options{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	appendN(t, a, 4)

	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = filler.Write(make([]byte, 4096))
	}
	filler.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling the file system: %v", err)
	}

	// The file's last page may hold a record or two; then the disk is full.
	for range 20 {
		before, _ := os.ReadFile(path)
		err = a.Append(&Record{Kind: KindIntent, Handle: "h", Command: strings.Repeat("x", 1500)})
		if err == nil {
			continue
		}
		var we *WriteError
		if !errors.As(err, &we) || we.Stopped || !errors.Is(err, ErrDiskFull) || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("Append on a full disk: %v; want a *WriteError, not Stopped, matching ErrDiskFull and ENOSPC", err)
		}
		if msg := err.Error(); !strings.Contains(msg, "nothing of the records was kept") || strings.Contains(msg, "no more records") {
			t.Errorf("the error says %q", msg)
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Errorf("a failed Append changed the log")
		}
		break
	}
	if err == nil {
		t.Fatal("20 Appends on a full disk succeeded")
	}
	os.Remove(filepath.Join(dir, "filler"))
	if err := a.Append(&Record{Kind: KindIntent, Handle: "after"}); err != nil {
		t.Fatalf("Append once there is room: %v", err)
	}
	a.Close()
	if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil {
		t.Fatal(err)
	}
}
