package output

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/actiongw/actiongw/internal/owner"
)

func TestOpenWhole(t *testing.T) {
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 100, RetainTailBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	// write starts an action with one stream of n bytes, ended as asked.
	write := func(n int, end func(*Action, *Capture)) (*Action, []byte) {
		in := numbered(n / 10)
		act := sp.Begin("ssh_download", "web1")
		c := act.Capture("file", nil, previews)
		c.Write(in)
		end(act, c)
		return act, in
	}
	finish := func(a *Action, _ *Capture) { a.Finish() }
	cut := func(a *Action, c *Capture) { c.Cut(); a.Finish() }
	running := func(*Action, *Capture) {}
	tests := []struct {
		name    string
		n       int
		end     func(*Action, *Capture)
		stream  string
		notKept string // in the *NotWholeError; "" means read whole
	}{
		{"empty", 0, finish, "file", ""},
		{"head only", 80, finish, "file", ""},
		{"head and a ring not yet wrapped", 150, finish, "file", ""},
		{"exactly head and tail", 200, finish, "file", ""},
		{"past head and tail", 300, finish, "file", "only the first and last bytes"},
		{"stopped early", 50, cut, "file", "stopped early"},
		{"running", 50, running, "file", "still running"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			act, in := write(tt.n, tt.end)
			defer act.Finish()
			w, err := sp.OpenWhole(act.Handle(), tt.stream)
			var nw *NotWholeError
			switch {
			case tt.notKept != "":
				if !errors.As(err, &nw) || !bytes.Contains([]byte(nw.Error()), []byte(tt.notKept)) {
					t.Fatalf("OpenWhole: %v; want a *NotWholeError saying %q", err, tt.notKept)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			defer w.Close()
			got, err := io.ReadAll(w)
			if err != nil || !bytes.Equal(got, in) || w.Size() != int64(len(in)) {
				t.Errorf("read %d bytes (size %d), err %v; want the %d written", len(got), w.Size(), err, len(in))
			}
		})
	}
	act, _ := write(10, finish)
	for _, tt := range []struct {
		handle, stream string
		want           error
	}{
		{"nonsense", "file", ErrMalformedHandle},
		{NewHandle(), "file", ErrUnknownHandle},
		{act.Handle(), "stdout", ErrUnknownStream},
	} {
		if _, err := sp.OpenWhole(tt.handle, tt.stream); !errors.Is(err, tt.want) {
			t.Errorf("OpenWhole(%q, %q): %v; want %v", tt.handle, tt.stream, err, tt.want)
		}
	}
}

// TestOpenWholeAfterAdoption: the mark of a stream that ended normally is
// in meta.json, so a process that takes over a finished action of one that
// ended reads it whole; one cut short stays refused.
func TestOpenWholeAfterAdoption(t *testing.T) {
	dir := t.TempDir()
	procs := &liveSet{alive: map[owner.ID]bool{}}
	opts := SpoolOptions{RetainHeadBytes: 1 << 20}
	a := procs.open(t, dir, opts, "201.1")
	whole, _ := spoolOne(t, a, nil, []byte("all of it\n"))
	cutAct := a.Begin("ssh_exec", "web1")
	c := cutAct.Capture("stdout", nil, previews)
	c.Write([]byte("part of it\n"))
	c.Cut()
	cutAct.Finish()
	procs.set("201.1", false)

	b := procs.open(t, dir, opts, "202.1")
	b.Reclaim(0) // takes a's actions over
	w, err := b.OpenWhole(whole.Handle(), "stdout")
	if err != nil {
		t.Fatalf("OpenWhole of an adopted whole stream: %v", err)
	}
	got, err := io.ReadAll(w)
	w.Close()
	if err != nil || string(got) != "all of it\n" {
		t.Errorf("read %q, %v; want the stream", got, err)
	}
	var nw *NotWholeError
	if _, err := b.OpenWhole(cutAct.Handle(), "stdout"); !errors.As(err, &nw) {
		t.Errorf("OpenWhole of an adopted stream cut short: %v; want a *NotWholeError", err)
	}
}
