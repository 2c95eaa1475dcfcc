package audit

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/actiongw/actiongw/internal/owner"
)

// The tests re-run their own binary as the other processes that share a
// log; helperEnv names what such a process does.
const helperEnv = "AUDIT_TEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		if err := helper(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	// Every Log's checkpoint saver stops by Close.
	goleak.VerifyTestMain(m)
}

// helper is a process appending to the log at $AUDIT_TEST_PATH, keyed with
// testKey. It says "ready OWNER" once it holds the log open, then:
//
//	append  waits for a line on stdin, appends $AUDIT_TEST_N records from
//	        4 goroutines, closes the log and exits
//	intent  appends an intent with handle $AUDIT_TEST_NAME, says "written",
//	        and waits for stdin to close (or to be killed)
func helper(mode string) error {
	rotate, _ := strconv.ParseInt(os.Getenv("AUDIT_TEST_ROTATE"), 10, 64)
	a, err := OpenWith(context.Background(), os.Getenv("AUDIT_TEST_PATH"), Options{Key: testKey, RotateBytes: rotate})
	if err != nil {
		return err
	}
	defer a.Close()
	name := os.Getenv("AUDIT_TEST_NAME")
	fmt.Printf("ready %s\n", owner.Self())
	in := bufio.NewReader(os.Stdin)
	switch mode {
	case "append":
		if _, err := in.ReadString('\n'); err != nil {
			return err
		}
		n, _ := strconv.Atoi(os.Getenv("AUDIT_TEST_N"))
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := g; i < n; i += 4 {
					errs <- a.Append(&Record{Kind: KindIntent, Handle: fmt.Sprintf("%s-%d", name, i), Tool: "ssh_exec", Target: "web1", Command: "uptime"})
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				return err
			}
		}
	case "intent":
		if err := a.Append(&Record{Kind: KindIntent, Handle: name, Tool: "ssh_exec", Target: "web1", Command: "sleep 600"}); err != nil {
			return err
		}
		fmt.Println("written")
		io.Copy(io.Discard, in)
	default:
		return fmt.Errorf("unknown helper mode %q", mode)
	}
	return a.Close()
}

// process is a helper process.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	owner owner.ID
	errb  strings.Builder
}

// startHelper starts a helper process and waits until it holds the log
// open.
func startHelper(t *testing.T, mode, path, name string, env ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), helperEnv+"="+mode, "AUDIT_TEST_PATH="+path, "AUDIT_TEST_NAME="+name)
	p.cmd.Env = append(p.cmd.Env, env...)
	p.cmd.Stderr = &p.errb
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait() })
	p.out = bufio.NewReader(stdout)
	id, ok := strings.CutPrefix(p.expect(t), "ready ")
	if !ok {
		t.Fatalf("helper %s did not get ready: %s", name, &p.errb)
	}
	p.owner = owner.ID(id)
	return p
}

// expect returns the helper's next line of output.
func (p *process) expect(t *testing.T) string {
	t.Helper()
	line, err := p.out.ReadString('\n')
	if err != nil {
		p.cmd.Wait()
		t.Fatalf("helper: %v; stderr: %s", err, &p.errb)
	}
	return strings.TrimSpace(line)
}

// TestAuditProcessesShareOneLog is three processes appending at once,
// each from four goroutines, rotating small files: the chain is whole and
// seq runs from 1 to N.
func TestAuditProcessesShareOneLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	const procs, each = 3, 150
	var ps []*process
	for i := range procs {
		ps = append(ps, startHelper(t, "append", path, fmt.Sprintf("p%d", i), "AUDIT_TEST_ROTATE=16384", fmt.Sprintf("AUDIT_TEST_N=%d", each)))
	}
	for _, p := range ps {
		fmt.Fprintln(p.stdin, "go")
	}
	for i, p := range ps {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("helper p%d: %v; stderr: %s", i, err, &p.errb)
		}
	}
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(procs*each + 1); rep.First != 1 || rep.Last != want || len(rep.Files) < 3 {
		t.Fatalf("Verify = %+v; want records 1 to %d (a key record and each helper's) in several files", rep, want)
	}
	seq, per := int64(0), map[string]int{}
	err = Tail(context.Background(), path, 1<<30, false, func(r *Record, err error) error {
		if err != nil {
			return err
		}
		if seq++; r.Seq != seq {
			return fmt.Errorf("record %d where %d belongs", r.Seq, seq)
		}
		name, _, _ := strings.Cut(r.Handle, "-")
		per[name]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range procs {
		if n := per[fmt.Sprintf("p%d", i)]; n != each {
			t.Errorf("helper p%d has %d records; want %d", i, n, each)
		}
	}
}

// TestAuditInterruptedIntents kills a process (kill -9) after its intent
// is on disk: the next start records its outcome as interrupted, once,
// and leaves the intent of a process that still runs alone.
func TestAuditInterruptedIntents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	dead := startHelper(t, "intent", path, "h-dead")
	dead.expect(t)
	dead.cmd.Process.Kill()
	dead.cmd.Wait()
	live := startHelper(t, "intent", path, "h-live")
	live.expect(t)

	a := reopen(t, path, Options{Key: testKey})
	for _, kind := range []Kind{KindIntent, KindOutcome} {
		if err := a.Append(&Record{Kind: kind, Handle: "h-done", Status: "exited"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Append(&Record{Kind: KindIntent, Decision: "deny", Handle: "h-denied"}); err != nil {
		t.Fatal(err)
	}
	got, err := a.RecordInterrupted()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Handle != "h-dead" || got[0].Status != StatusInterrupted || got[0].Kind != KindOutcome ||
		got[0].Tool != "ssh_exec" || got[0].Target != "web1" || !strings.Contains(got[0].Reason, string(dead.owner)) {
		t.Fatalf("RecordInterrupted = %+v; want one interrupted outcome of h-dead naming process %s", got, dead.owner)
	}
	b := reopen(t, path, Options{Key: testKey})
	if got, err := b.RecordInterrupted(); err != nil || len(got) != 0 {
		t.Errorf("a second RecordInterrupted = %+v, %v; want nothing (h-dead has its outcome, h-live runs)", got, err)
	}

	live.stdin.Close()
	if err := live.cmd.Wait(); err != nil {
		t.Fatalf("helper h-live: %v", err)
	}
	if got, err := b.RecordInterrupted(); err != nil || len(got) != 1 || got[0].Handle != "h-live" {
		t.Errorf("RecordInterrupted after h-live ended = %+v, %v; want its outcome", got, err)
	}
	if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil {
		t.Error(err)
	}
}
