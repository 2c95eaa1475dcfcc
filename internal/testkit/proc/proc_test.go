package proc_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/testkit/proc"
	"github.com/actiongw/actiongw/internal/testkit/testenv"
)

func TestMemory(t *testing.T) {
	for _, field := range []string{"VmRSS", "VmHWM"} {
		self, err := proc.Memory(0, field)
		if err != nil {
			t.Fatal(err)
		}
		byPID, err := proc.Memory(os.Getpid(), field)
		if err != nil {
			t.Fatal(err)
		}
		if self < 1<<20 || byPID < 1<<20 {
			t.Errorf("%s = %d (self), %d (by pid); want at least 1 MiB for a Go test binary", field, self, byPID)
		}
	}
	if _, err := proc.Memory(0, "NoSuchField"); err == nil {
		t.Error("Memory of an unknown field: no error")
	}
}

func TestCPU(t *testing.T) {
	before, err := proc.CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until 50 ms of CPU show, however busy the machine is.
	for deadline := time.Now().Add(10 * time.Second); ; {
		after, err := proc.CPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after-before >= 50*time.Millisecond {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("CPU grew by %v in 10 s of spinning; want at least 50 ms", after-before)
		}
	}
}

func TestSyscalls(t *testing.T) {
	r0, w0, err := proc.Syscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "io")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 10 {
		if _, err := f.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	r1, w1, err := proc.Syscalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if w1-w0 < 10 || r1 < r0 {
		t.Errorf("syscalls went from %d reads, %d writes to %d, %d after 10 writes; want 10 writes more", r0, w0, r1, w1)
	}
}

func TestAliveAndParent(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !proc.Alive(pid) || proc.Parent(pid) != os.Getpid() {
		t.Errorf("running child: alive %v, parent %d; want alive, parent %d", proc.Alive(pid), proc.Parent(pid), os.Getpid())
	}
	// Start returns once the exec is past its point of no return; the
	// kernel fills in the new arguments a moment later.
	var got string
	testenv.Eventually(10*time.Second, func() bool { got = proc.Command(pid); return got == "sleep 10" })
	if got != "sleep 10" {
		t.Errorf("Command: got %q; want %q", got, "sleep 10")
	}
	if got := proc.Name(pid); got != "sleep" {
		t.Errorf("Name: got %q; want sleep", got)
	}
	if !slices.Contains(proc.Descendants(os.Getpid()), pid) {
		t.Errorf("Descendants of the test: got %v; want %d among them", proc.Descendants(os.Getpid()), pid)
	}
	self, err1 := proc.StartTime(os.Getpid())
	child, err2 := proc.StartTime(pid)
	if err1 != nil || err2 != nil || child < self {
		t.Errorf("StartTime: test %d (%v), child %d (%v); want the child no earlier", self, err1, child, err2)
	}
	if u, err := proc.UID(pid); err != nil || u != os.Getuid() {
		t.Errorf("UID: %d, %v; want %d", u, err, os.Getuid())
	}
	if !slices.Contains(proc.Children(os.Getpid()), pid) || proc.Zombie(pid) {
		t.Errorf("Children of the test: %v, zombie %v; want %d among them, running", proc.Children(os.Getpid()), proc.Zombie(pid), pid)
	}
	cmd.Process.Kill()
	// A killed child is a zombie, not alive, until reaped.
	if !testenv.Eventually(30*time.Second, func() bool { return !proc.Alive(pid) }) {
		t.Error("killed child still alive after 30 s")
	}
	if !proc.Zombie(pid) {
		t.Error("a killed child not reaped is no zombie")
	}
	if got := proc.Command(pid); !strings.HasPrefix(got, "[") {
		t.Errorf("Command of a zombie: got %q; want its [name]", got)
	}
	cmd.Wait()
	if proc.Alive(pid) || proc.Parent(pid) != 0 {
		t.Errorf("reaped child: alive %v, parent %d; want gone", proc.Alive(pid), proc.Parent(pid))
	}
}
