//go:build linux

package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
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
