package audit

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAuditResumedStart: OpenWith read every record of every file, so a
// serve with a day's history took seconds to start (3.9 s for 200,000
// records). Now it reads the last resumeLines and verifies the rest in
// the background: an old intent whose process died still gets its
// interrupted outcome, a record edited among the old ones stops every
// Append once the background verification finds it, and one among the
// last records is refused at open as before.
func TestAuditResumedStart(t *testing.T) {
	const n = 3 * resumeLines
	setup := func(t *testing.T) string {
		path := filepath.Join(t.TempDir(), "audit.jsonl")
		dead := startHelper(t, "intent", path, "h-old-dead")
		dead.expect(t)
		dead.cmd.Process.Kill()
		dead.cmd.Wait()
		a := reopen(t, path, Options{Key: testKey, RotateBytes: 200 << 10})
		appendN(t, a, n)
		a.Close()
		return path
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	edit := func(t *testing.T, path string, line int) {
		t.Helper()
		l := lines(t, path)
		l[line-1] = strings.Replace(l[line-1], "echo", "ECHO", 1)
		writeLines(t, path, l)
	}

	t.Run("intact", func(t *testing.T) {
		path := setup(t)
		a := reopen(t, path, Options{Key: testKey})
		if !a.resumed {
			t.Fatal("OpenWith read the whole log; want it to resume from its end")
		}
		if err := a.WaitVerified(ctx); err != nil {
			t.Fatalf("background verification: %v", err)
		}
		a.Close()
		var found bool
		if err := Tail(ctx, path, 5, false, func(r *Record, err error) error {
			found = found || r != nil && r.Handle == "h-old-dead" && r.Status == StatusInterrupted
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Error("the old intent of a dead process has no interrupted outcome; want the background verification to write it")
		}
		if _, err := VerifyWith(ctx, path, VerifyOptions{Key: testKey}); err != nil {
			t.Error(err)
		}
	})
	t.Run("old record edited: found in the background", func(t *testing.T) {
		path := setup(t)
		files, err := listFiles(path)
		if err != nil || len(files) < 2 {
			t.Fatalf("files %v, %v; want the log rotated", files, err)
		}
		edit(t, files[0].path, 10)
		a := reopen(t, path, Options{Key: testKey})
		err = a.WaitVerified(ctx)
		var de *DamagedError
		if !errors.As(err, &de) || !strings.Contains(de.Reason, "mac does not match") {
			t.Fatalf("background verification: %v; want the edited record found", err)
		}
		if err := a.Append(&Record{Kind: KindIntent, Handle: "h-after"}); !errors.As(err, &de) {
			t.Errorf("Append after the damage was found: %v; want it refused with the damage", err)
		}
	})
	t.Run("recent record edited: refused at open", func(t *testing.T) {
		path := setup(t)
		edit(t, path, len(lines(t, path))-3)
		if a, err := OpenWith(ctx, path, Options{Key: testKey}); err == nil {
			a.Close()
			t.Fatal("OpenWith accepted a log with a recent record edited")
		} else if !errors.As(err, new(*DamagedError)) {
			t.Fatalf("OpenWith: %v; want a *DamagedError", err)
		}
	})
}
