package output

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// diskUsage is what the files and directories under dir, dir included,
// take on disk.
func diskUsage(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			return err
		}
		n += st.Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSpoolFullDiskHelper runs in a mount namespace of its own, for
// TestSpoolReclaimOnFullDisk: it mounts a 1 MiB tmpfs and fills it.
func TestSpoolFullDiskHelper(t *testing.T) {
	dir := os.Getenv("OUTPUT_FULL_DISK_DIR")
	if dir == "" {
		t.Skip("helper process for TestSpoolReclaimOnFullDisk")
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	sp, err := OpenSpool(filepath.Join(dir, "spool"), SpoolOptions{RetainHeadBytes: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	out := bytes.Repeat([]byte("x"), 256<<10)
	whole := func(sum Stream) bool {
		return sum.SpoolError == "" && fmt.Sprint(sum.Retained) == fmt.Sprint([]ByteRange{{0, int64(len(out))}})
	}
	var acts []*Action
	for range 3 {
		act, sum := spoolOne(t, sp, nil, out)
		if !whole(sum) {
			t.Fatalf("action on a disk with room: retained %v, spool error %q", sum.Retained, sum.SpoolError)
		}
		acts = append(acts, act)
	}
	// No room for a fourth: its writes find the disk full, evict the
	// oldest action and go on.
	act, sum := spoolOne(t, sp, nil, out)
	if !whole(sum) {
		t.Errorf("action on a full disk: retained %v, spool error %q; want all kept after a reclaim", sum.Retained, sum.SpoolError)
	}
	for i, a := range append(acts, act) {
		_, err := readAll(t, sp, a.Handle())
		if gone := errors.Is(err, ErrUnknownHandle); gone != (i == 0) {
			t.Errorf("action %d: got %v; want evicted %v", i, err, i == 0)
		}
	}

	// Another writer (the audit log) finds the disk full: Reclaim makes
	// room for it.
	ballast, err := os.Create(filepath.Join(dir, "ballast"))
	if err != nil {
		t.Fatal(err)
	}
	defer ballast.Close()
	fill := func() {
		t.Helper()
		for {
			if _, err := ballast.Write(out[:4096]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				return
			}
		}
	}
	fill()
	if freed := sp.Reclaim(100 << 10); freed < 100<<10 {
		t.Errorf("Reclaim(100 KiB) freed %d bytes", freed)
	}
	if _, err := ballast.Write(out[:100<<10]); err != nil {
		t.Errorf("write after Reclaim: %v", err)
	}

	// Nothing left to evict: the stream gives up, counts still whole.
	sp.Reclaim(1 << 40)
	fill()
	act, sum = spoolOne(t, sp, nil, out)
	if sum.Bytes != int64(len(out)) || sum.SHA256 != sha(out) || !strings.Contains(sum.SpoolError, "no space left") {
		t.Errorf("got %d bytes, spool error %q; want the count, the hash and the full disk reported", sum.Bytes, sum.SpoolError)
	}
	if _, err := readAll(t, sp, act.Handle()); err != nil {
		t.Errorf("action on a disk with no room: %v; want it readable for what was kept", err)
	}
}

// TestSpoolReclaimOnFullDisk fills a real filesystem: a tmpfs mounted in a
// private mount namespace, which needs root.
func TestSpoolReclaimOnFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the full disk test needs root to mount a tmpfs")
		}
		t.Skip("the full disk test needs root to mount a tmpfs")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSpoolFullDiskHelper$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "OUTPUT_FULL_DISK_DIR="+t.TempDir())
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestSpoolFullDiskHelper") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}
