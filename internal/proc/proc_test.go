package proc

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestMemory(t *testing.T) {
	for _, field := range []string{"VmRSS", "VmHWM"} {
		self, err := Memory(0, field)
		if err != nil {
			t.Fatal(err)
		}
		byPID, err := Memory(os.Getpid(), field)
		if err != nil {
			t.Fatal(err)
		}
		if self < 1<<20 || byPID < 1<<20 {
			t.Errorf("%s = %d (self), %d (by pid); want at least 1 MiB for a Go test binary", field, self, byPID)
		}
	}
	if _, err := Memory(0, "NoSuchField"); err == nil {
		t.Error("Memory of an unknown field: no error")
	}
}

func TestCPU(t *testing.T) {
	before, err := CPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until 50 ms of CPU show, however busy the machine is.
	for deadline := time.Now().Add(10 * time.Second); ; {
		after, err := CPU(os.Getpid())
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

func TestAliveAndParent(t *testing.T) {
	cmd := exec.Command("sleep", "10")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) || Parent(pid) != os.Getpid() {
		t.Errorf("running child: alive %v, parent %d; want alive, parent %d", Alive(pid), Parent(pid), os.Getpid())
	}
	cmd.Process.Kill()
	for start := time.Now(); Alive(pid) && time.Since(start) < 5*time.Second; {
		time.Sleep(5 * time.Millisecond) // a killed child is a zombie, not alive, until reaped
	}
	if Alive(pid) {
		t.Error("killed child still alive after 5 s")
	}
	cmd.Wait()
	if Alive(pid) || Parent(pid) != 0 {
		t.Errorf("reaped child: alive %v, parent %d; want gone", Alive(pid), Parent(pid))
	}
}
