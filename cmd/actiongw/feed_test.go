//go:build linux

package main

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/feed"
)

// watched is a feed.Watcher over a test's state directory, with the
// events it delivered so far.
type watched struct {
	w      *feed.Watcher
	events chan feed.Event
}

// watch starts a Watcher on state, stopped and waited for at cleanup.
func watch(t testing.TB, state string) *watched {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := feed.Watch(ctx, state)
	t.Cleanup(func() {
		cancel()
		w.Wait()
	})
	return &watched{w: w, events: make(chan feed.Event)}
}

// until waits (a minute at most) for an event for which ok holds, and
// returns it; events before it are passed to seen, if set.
func (wd *watched) until(t testing.TB, what string, ok func(feed.Event) bool) feed.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case ev, open := <-wd.w.Events():
			if !open {
				t.Fatalf("waiting for %s: the Watcher's events ended", what)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %s within a minute; the view: %+v", what, wd.w.Snapshot())
		}
	}
}

// snapshotUntil polls the Watcher's Snapshot (a minute at most) until ok
// holds, and returns it.
func (wd *watched) snapshotUntil(t testing.TB, what string, ok func(feed.Snapshot) bool) feed.Snapshot {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s := wd.w.Snapshot()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot with %s within a minute; the last: %+v", what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func serveIDs(s feed.Snapshot) map[int]string {
	ids := map[int]string{}
	for _, sv := range s.Serves {
		ids[sv.PID] = sv.ID
	}
	return ids
}

func TestFeedWatcher(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	first := s.client.Pid()
	// A socket left by a serve that died is not a serve.
	stale := filepath.Join(feed.Dir(s.state), "999999999.1.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	wd := watch(t, s.state)
	// With the client's name, from its initialize.
	snap := wd.snapshotUntil(t, "the serve started before the Watcher", func(s feed.Snapshot) bool {
		return len(s.Serves) == 1 && s.Serves[0].PID == first && s.Serves[0].Client == "actiongw-host"
	})

	t.Run("socket private", func(t *testing.T) {
		dir := feed.Dir(s.state)
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("console folder: %v, mode %v; want 0700", err, fi.Mode().Perm())
		}
		sock := filepath.Join(dir, serveIDs(snap)[first]+".sock")
		fi, err = os.Stat(sock)
		if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Fatalf("socket %s: %v, mode %v; want a socket, 0600", sock, err, fi.Mode())
		}
	})

	t.Run("a serve started later", func(t *testing.T) {
		second := s.startServer(t, s.stderr)
		wd.snapshotUntil(t, "the serve started after the Watcher", func(s feed.Snapshot) bool {
			ids := serveIDs(s)
			return ids[first] != "" && ids[second.Pid()] != ""
		})
		r := decode[struct{ Handle string }](t, s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "echo from the first"}))
		ev := wd.until(t, "the first serve's action ending", func(ev feed.Event) bool {
			return ev.Action != nil && ev.Action.Handle == r.Handle && !ev.Action.Ended.IsZero()
		})
		if a := ev.Action; a.Serve != serveIDs(snap)[first] || a.Tool != "ssh_exec" || a.Target != "box" || a.What != "echo from the first" || a.Status != "exited" {
			t.Errorf("action: %+v", a)
		}

		// Killed, the second is dropped, and its socket removed.
		id := serveIDs(wd.w.Snapshot())[second.Pid()]
		if err := syscall.Kill(second.Pid(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		wd.until(t, "the killed serve gone", func(ev feed.Event) bool { return ev.ServeGone == id })
		if got := serveIDs(wd.w.Snapshot()); got[second.Pid()] != "" || got[first] == "" {
			t.Errorf("serves after the kill: %v; want only the first", got)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := os.Stat(filepath.Join(feed.Dir(s.state), id+".sock")); os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the killed serve's socket is still there after a minute")
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale socket of a dead process: %v; want removed", err)
	}
}

// outputOf collects the output pieces of handle's stream until its
// action ends, checking that they follow one another, and returns them
// joined, after the pieces seen before.
func (wd *watched) outputOf(t testing.TB, handle, stream, before string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(before)
	wd.until(t, "the action's end", func(ev feed.Event) bool {
		if o := ev.Output; o != nil && o.Handle == handle && o.Stream == stream {
			if o.Offset != int64(b.Len()) {
				t.Errorf("piece at offset %d; want %d (no gap at this rate)", o.Offset, b.Len())
			}
			b.WriteString(o.Data)
		}
		return ev.Action != nil && ev.Action.Handle == handle && !ev.Action.Ended.IsZero()
	})
	return b.String()
}

func TestFeedOutputAndStop(t *testing.T) {
	s := startServedWith(t, servedOptions{})
	wd := watch(t, s.state)
	serve := wd.snapshotUntil(t, "the serve", func(s feed.Snapshot) bool { return len(s.Serves) == 1 }).Serves[0].ID

	t.Run("output as it arrives", func(t *testing.T) {
		command := "for i in 1 2 3 4 5; do echo line $i; echo err $i >&2; sleep 0.2; done"
		h := s.startBackground(t, "box", command)
		// The first line shows while the action runs.
		first := wd.until(t, "the first line", func(ev feed.Event) bool {
			return ev.Output != nil && ev.Output.Handle == h && ev.Output.Stream == "stdout"
		}).Output
		if first.Offset != 0 || !strings.HasPrefix(first.Data, "line 1\n") {
			t.Fatalf("first piece: %+v; want line 1 at offset 0", first)
		}
		if a := findAction(wd.w.Snapshot(), h); a == nil || a.Status != "running" || !a.Background {
			t.Errorf("while it runs: %+v; want running, in the background", a)
		}
		if got, want := wd.outputOf(t, h, "stdout", first.Data), string(localOutput(t, "for i in 1 2 3 4 5; do echo line $i; done")); got != want {
			t.Errorf("stdout in the feed: %q; want %q", got, want)
		}
		if a := findAction(wd.w.Snapshot(), h); a == nil || a.Status != "exited" || a.Ended.IsZero() {
			t.Errorf("ended: %+v", a)
		}
	})

	t.Run("stop", func(t *testing.T) {
		h := s.startBackground(t, "box", "sleep 120")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := wd.w.Stop(ctx, serve, h)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != "cancelled" || !res.RemoteStopped || !strings.Contains(res.Reason, "console") {
			t.Errorf("stop: %+v; want cancelled, remote_stopped, the reason naming the console", res)
		}
		ev := wd.until(t, "the stopped action's end", func(ev feed.Event) bool {
			return ev.Action != nil && ev.Action.Handle == h && !ev.Action.Ended.IsZero()
		})
		if a := ev.Action; a.RemoteStopped == nil || !*a.RemoteStopped || a.StopReason != res.Reason {
			t.Errorf("ended: %+v; want remote_stopped and the reason %q", a, res.Reason)
		}
		// The agent sees the same end.
		if out := s.finalStatus(t, h); out.Status != "cancelled" || out.RemoteStopped == nil || !*out.RemoteStopped {
			t.Errorf("action_status after the console's stop: %+v", out)
		}
		// Stopped again: it had ended, nothing is stopped.
		again, err := wd.w.Stop(ctx, serve, h)
		if err != nil || again.Status != "cancelled" || !strings.Contains(again.Reason, "already ended") {
			t.Errorf("stop again: %+v, %v", again, err)
		}
		var re *feed.RequestError
		if _, err := wd.w.Stop(ctx, serve, "no-such-handle"); !errors.As(err, &re) {
			t.Errorf("stop of an unknown handle: %v; want a *feed.RequestError", err)
		}
		if _, err := wd.w.Stop(ctx, "123.456", h); !errors.Is(err, feed.ErrServeGone) {
			t.Errorf("stop at an unknown serve: %v; want ErrServeGone", err)
		}
	})
}

func findAction(s feed.Snapshot, handle string) *feed.Action {
	for i := range s.Actions {
		if s.Actions[i].Handle == handle {
			return &s.Actions[i]
		}
	}
	return nil
}
