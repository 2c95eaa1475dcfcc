package audit

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
	"github.com/actiongw/actiongw/secrets"
)

var testKey = []byte(strings.Repeat("k", 64))

func redactPW(s string) string { return strings.ReplaceAll(s, "hunter22", "[REDACTED:pw]") }

// openTestLog opens a log in a new directory with opts, closed when the
// test ends.
func openTestLog(t *testing.T, opts Options) (*Log, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	return reopen(t, path, opts), path
}

func reopen(t *testing.T, path string, opts Options) *Log {
	t.Helper()
	a, err := OpenWith(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func appendN(t testing.TB, a *Log, n int) {
	t.Helper()
	for i := range n {
		kind := KindIntent
		if i%2 == 1 {
			kind = KindOutcome
		}
		if err := a.Append(&Record{Kind: kind, Handle: fmt.Sprintf("h%d", i/2), Tool: "ssh_exec", Target: "web1", Command: "echo hunter22"}); err != nil {
			t.Fatal(err)
		}
	}
}

// lines returns the lines of the file at path.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func writeLines(t *testing.T, path string, l []string) {
	t.Helper()
	out := strings.Join(l, "\n")
	if len(l) > 0 {
		out += "\n"
	}
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
}

// mustDamage asserts that err is a *DamagedError at file (base name) and
// line whose reason holds want, and returns it.
func mustDamage(t *testing.T, err error, file string, line int, want string) *DamagedError {
	t.Helper()
	var de *DamagedError
	if !errors.As(err, &de) {
		t.Fatalf("got %v; want a *DamagedError", err)
	}
	if filepath.Base(de.File) != file || de.Line != line || !strings.Contains(de.Reason, want) {
		t.Fatalf("got damage at %s line %d (%s); want %s line %d with %q", de.File, de.Line, de.Reason, file, line, want)
	}
	if !strings.Contains(err.Error(), "actiongw audit seal") {
		t.Errorf("the error %q does not name the way out", err)
	}
	return de
}

func TestAuditChainVerifies(t *testing.T) {
	for _, key := range [][]byte{nil, testKey} {
		t.Run(fmt.Sprintf("keyed=%v", key != nil), func(t *testing.T) {
			a, path := openTestLog(t, Options{Redact: redactPW, Key: key})
			appendN(t, a, 5)
			a.Close()
			want := int64(5)
			if key != nil {
				want = 6 // the key record first
			}
			rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: key})
			if err != nil || rep.Last != want {
				t.Fatalf("Verify = %+v, %v; want %d records", rep, err, want)
			}
			data, _ := os.ReadFile(path)
			if bytes.Contains(data, []byte("hunter22")) || !bytes.Contains(data, []byte("[REDACTED:pw]")) {
				t.Errorf("audit log holds the secret or lacks the redaction marker:\n%s", data)
			}
			for _, p := range []string{path, headPath(path), lockPath(path)} {
				if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("%s: mode %v, %v; want 0600", p, st.Mode().Perm(), err)
				}
			}
			b := reopen(t, path, Options{Key: key})
			appendN(t, b, 2)
			b.Close()
			if rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: key}); err != nil || rep.Last != want+2 {
				t.Fatalf("after reopen: Verify = %+v, %v; want %d records", rep, err, want+2)
			}
		})
	}
}

func TestAuditAppendSetsOwnerAndRefusesOtherKinds(t *testing.T) {
	a, path := openTestLog(t, Options{})
	rec := &Record{Kind: KindIntent, Handle: "h", Owner: "1.2"}
	if err := a.Append(rec); err != nil {
		t.Fatal(err)
	}
	if rec.Seq != 1 || rec.Owner != owner.Self() || rec.Time.IsZero() {
		t.Errorf("appended %+v; want seq 1, this process as owner, a time", rec)
	}
	for _, k := range []Kind{KindKey, KindSeal, KindRepair, "", "other"} {
		if err := a.Append(&Record{Kind: k}); err == nil {
			t.Errorf("Append of kind %q: nil error; want it refused", k)
		}
	}
	if err := a.Append(&Record{Kind: KindIntent, Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Errorf("Append of a time JSON cannot hold: nil error; want it refused")
	}
	if l := lines(t, path); len(l) != 1 {
		t.Errorf("log has %d lines; want 1", len(l))
	}
}

func TestAuditVerifyDetectsTampering(t *testing.T) {
	tests := []struct {
		name     string
		tamper   func(lines []string) []string
		wantLine int
		want     string
	}{
		{"edited middle line", func(l []string) []string {
			l[2] = strings.Replace(l[2], "ssh_exec", "http_request", 1)
			return l
		}, 3, "edited"},
		{"removed middle line", func(l []string) []string { return append(l[:2], l[3:]...) }, 3, "sequence 4 where 3 belongs"},
		{"swapped lines", func(l []string) []string { l[1], l[2] = l[2], l[1]; return l }, 2, "sequence 3 where 2 belongs"},
		{"edited last line", func(l []string) []string {
			l[5] = strings.Replace(l[5], "web1", "web2", 1)
			return l
		}, 0, "names record 6 with another hash"},
		{"removed last line", func(l []string) []string { return l[:5] }, 0, "records were removed from the end"},
		{"garbage line", func(l []string) []string { l[0] = "{not json"; return l }, 1, "not a JSON record"},
		{"line with NUL", func(l []string) []string { l[1] = strings.Replace(l[1], "web1", "we\x00b1", 1); return l }, 2, "not a JSON record"},
		{"mac moved inside", func(l []string) []string {
			l[3] = strings.Replace(l[3], `"kind"`, `"mac":"00","kind"`, 1)
			return l
		}, 4, "mac is not at the end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, path := openTestLog(t, Options{})
			appendN(t, a, 6)
			a.Close()
			writeLines(t, path, tt.tamper(lines(t, path)))
			file := "audit.jsonl"
			if tt.wantLine == 0 {
				file = "audit.jsonl.head"
			}
			_, err := Verify(path)
			mustDamage(t, err, file, tt.wantLine, tt.want)
			_, err = OpenWith(context.Background(), path, Options{})
			mustDamage(t, err, file, tt.wantLine, tt.want)
		})
	}
}

func TestAuditConcurrentAppendsKeepWholeLines(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { appendN(t, a, 10) })
	}
	wg.Wait()
	if rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil || rep.Last != 201 {
		t.Fatalf("Verify = %+v, %v; want 201 records", rep, err)
	}
}

// TestAuditTwoLogsOneFile is two writers in one process, each with its
// own view: every append continues what the other wrote.
func TestAuditTwoLogsOneFile(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey, RotateBytes: 2048})
	b := reopen(t, path, Options{Key: testKey, RotateBytes: 2048})
	for i := range 40 {
		w := a
		if i%3 == 0 {
			w = b
		}
		if err := w.Append(&Record{Kind: KindIntent, Handle: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	a.Close()
	b.Close()
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey})
	if err != nil || rep.Last != 41 || len(rep.Files) < 3 {
		t.Fatalf("Verify = %+v, %v; want 41 records in 3 files or more", rep, err)
	}
}

func TestAuditFailedWriteLeavesNoPartialRecord(t *testing.T) {
	a, path := openTestLog(t, Options{})
	appendN(t, a, 2)
	before, _ := os.ReadFile(path)
	// Close the file under the log: every write now fails.
	a.f.Close()
	err := a.Append(&Record{Kind: KindIntent})
	var we *WriteError
	if !errors.As(err, &we) || we.Stopped || !strings.Contains(err.Error(), "nothing of the records was kept") {
		t.Fatalf("Append on a broken file: %v; want a *WriteError that is not Stopped and says nothing was kept", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Errorf("a failed Append changed the file")
	}
}

// TestAuditReadsVersion1 opens a log written by the version before keys,
// owners and rotation: it verifies, takes a key record, and its intent
// without an outcome (and without an owner) is marked interrupted.
func TestAuditReadsVersion1(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	for _, name := range []string{"audit.jsonl", "audit.jsonl.head"} {
		data, err := os.ReadFile(filepath.Join("testdata", "v1", name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, name), data, 0o600)
	}
	if n, err := Verify(path); err != nil || n != 5 {
		t.Fatalf("Verify of a version 1 log = %d, %v; want 5 records", n, err)
	}
	var saved []Checkpoint
	a := reopen(t, path, Options{Key: testKey, SaveCheckpoint: func(cp Checkpoint) { saved = append(saved, cp) }})
	got, err := a.RecordInterrupted()
	if err != nil || len(got) != 1 || got[0].Handle != "a2" || got[0].Status != StatusInterrupted || !strings.Contains(got[0].Reason, "did not record its process") {
		t.Fatalf("RecordInterrupted = %+v, %v; want the outcome of a2", got, err)
	}
	a.Close()
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey, Checkpoint: &saved[len(saved)-1]})
	if err != nil || rep.KeyedFrom != 6 || rep.Last != 7 {
		t.Fatalf("Verify = %+v, %v; want keyed from 6 to 7", rep, err)
	}
	if s := rep.String(); !strings.Contains(s, "records 1 to 5 predate the key") || !strings.Contains(s, "records 6 to 7 carry valid macs") {
		t.Errorf("report:\n%s\nwant it to say what predates the key", s)
	}
}

func TestAuditOpenWithoutKeyRefusesKeyedLog(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey})
	appendN(t, a, 2)
	a.Close()
	_, err := OpenWith(context.Background(), path, Options{})
	if !errors.Is(err, ErrNoKey) {
		t.Fatalf("OpenWith without a key = %v; want ErrNoKey", err)
	}
	_, err = OpenWith(context.Background(), path, Options{Key: []byte("another key")})
	mustDamage(t, err, "audit.jsonl", 1, "keyed with another key")
}

func TestAuditCheckpointSaver(t *testing.T) {
	defer func(n int) { checkpointEvery = n }(checkpointEvery)
	checkpointEvery = 5
	release := make(chan struct{})
	saved := make(chan Checkpoint, 100)
	first := true
	save := func(cp Checkpoint) {
		saved <- cp
		if !first {
			<-release // a keyring that hangs
		}
		first = false
	}
	a, path := openTestLog(t, Options{Key: testKey, SaveCheckpoint: save})
	if cp := <-saved; cp.Seq != 1 {
		t.Fatalf("checkpoint at open: %+v; want record 1 (the key record)", cp)
	}
	// The saver hangs on the first periodic save; appends go on.
	appendN(t, a, 30)
	if cp := <-saved; cp.Seq != 6 {
		t.Errorf("periodic checkpoint %+v; want record 6", cp)
	}
	close(release)
	a.Close()
	var last Checkpoint
	for len(saved) > 0 {
		last = <-saved
	}
	if last.Seq != 31 {
		t.Errorf("last checkpoint %+v; want record 31, saved at close", last)
	}
	if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey, Checkpoint: &last}); err != nil {
		t.Errorf("Verify with the last checkpoint: %v", err)
	}
}

func TestAuditRotation(t *testing.T) {
	var mu sync.Mutex
	var saved []Checkpoint
	save := func(cp Checkpoint) { mu.Lock(); saved = append(saved, cp); mu.Unlock() }
	a, path := openTestLog(t, Options{Key: testKey, RotateBytes: 4096, SaveCheckpoint: save})
	appendN(t, a, 100)
	a.Close()
	files, err := listFiles(path)
	if err != nil || len(files) < 4 {
		t.Fatalf("files %v, %v; want several", files, err)
	}
	for _, f := range files[:len(files)-1] {
		l := lines(t, f.path)
		if !strings.HasPrefix(l[0], fmt.Sprintf(`{"seq":%d,`, f.first)) {
			t.Errorf("%s begins %.20s; want record %d", f.path, l[0], f.first)
		}
	}
	mu.Lock()
	if len(saved) < len(files)+1 {
		t.Errorf("%d checkpoints saved; want one at open, one per rotation, one at close", len(saved))
	}
	last := saved[len(saved)-1]
	mu.Unlock()
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey, Checkpoint: &last})
	if err != nil || rep.Last != 101 || len(rep.Files) != len(files) {
		t.Fatalf("Verify = %+v, %v; want 101 records in %d files", rep, err, len(files))
	}

	var got []int64
	err = Tail(context.Background(), path, 30, false, func(r *Record, err error) error {
		if err != nil {
			return err
		}
		got = append(got, r.Seq)
		return nil
	})
	if err != nil || len(got) != 30 || got[0] != 72 || got[29] != 101 {
		t.Errorf("Tail -n 30 across files = %v, %v; want records 72 to 101", got, err)
	}

	// A record edited in a rotated file is found there.
	l := lines(t, files[1].path)
	l[2] = strings.Replace(l[2], "web1", "web9", 1)
	writeLines(t, files[1].path, l)
	_, err = Verify(path)
	mustDamage(t, err, filepath.Base(files[1].path), 3, "edited")
	_, err = VerifyWith(context.Background(), path, VerifyOptions{Key: testKey})
	mustDamage(t, err, filepath.Base(files[1].path), 3, "mac does not match")

	// A missing rotated file is found.
	os.Remove(files[1].path)
	_, err = Verify(path)
	mustDamage(t, err, filepath.Base(files[2].path), 1, fmt.Sprintf("sequence %d where %d belongs", files[2].first, files[1].first))
}

func TestAuditSeal(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey, RotateBytes: 2048})
	appendN(t, a, 40)
	other := reopen(t, path, Options{Key: testKey})
	a.Close()
	if _, err := Seal(context.Background(), path, VerifyOptions{Key: testKey}); err == nil || !strings.Contains(err.Error(), "nothing to seal") {
		t.Fatalf("Seal of a good log = %v; want it refused", err)
	}
	files, _ := listFiles(path)
	l := lines(t, files[0].path)
	l[1] = "{garbage"
	writeLines(t, files[0].path, l)
	_, err := OpenWith(context.Background(), path, Options{Key: testKey})
	de := mustDamage(t, err, filepath.Base(files[0].path), 2, "not a JSON record")

	res, err := Seal(context.Background(), path, VerifyOptions{Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if res.Damage.Line != 2 || res.Record.Sealed.LastSeq != de.LastSeq || res.Record.Sealed.LastHash != de.LastHash || res.Checkpoint == nil {
		t.Errorf("Seal = %+v; want the damage at line 2 and the last good record %d", res, de.LastSeq)
	}
	moved, _ := filepath.Glob(filepath.Join(res.Dir, "*"))
	if len(moved) < 3 {
		t.Errorf("moved %v; want the log's files", moved)
	}
	// The process that had the log open appends no more, and says why.
	err = other.Append(&Record{Kind: KindIntent})
	var we *WriteError
	if !errors.As(err, &we) || !we.Stopped || !strings.Contains(err.Error(), "moved away") {
		t.Errorf("Append after a seal = %v; want it stopped, saying the file was moved", err)
	}
	b := reopen(t, path, Options{Key: testKey, Checkpoint: res.Checkpoint})
	appendN(t, b, 2)
	b.Close()
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey, Checkpoint: res.Checkpoint})
	if err != nil || rep.Last != 3 || rep.Sealed == nil || rep.Sealed.Dir != filepath.Base(res.Dir) {
		t.Fatalf("Verify after seal = %+v, %v; want 3 records after a seal record", rep, err)
	}
	if !strings.Contains(rep.String(), "this chain starts with a seal record") {
		t.Errorf("report does not name the seal:\n%s", rep)
	}
}

// TestAuditTornLine is a last line without its newline, as a writer
// killed in the middle of its write leaves: not damage; the next open
// cuts it and records that it did.
func TestAuditTornLine(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey})
	appendN(t, a, 3)
	a.Close()
	torn := `{"seq":5,"time":"2026-01-01T00:00:00Z","kind":"inte`
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(torn)
	f.Close()
	rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey})
	if err != nil || rep.Torn == 0 || !strings.Contains(rep.String(), "the last line is incomplete") {
		t.Fatalf("Verify of a torn line = %v, %v; want it reported, not damage", rep, err)
	}
	b := reopen(t, path, Options{Key: testKey})
	b.Close()
	l := lines(t, path)
	if len(l) != 5 || !strings.Contains(l[4], `"kind":"repair"`) || !strings.Contains(l[4], fmt.Sprintf("cut %d bytes", len(torn))) {
		t.Fatalf("after open: %q; want a repair record after the 4 records", l[len(l)-1])
	}
	if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil {
		t.Error(err)
	}
}

func TestAuditKeyNeverPrints(t *testing.T) {
	opts := VerifyOptions{Key: testKey}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("open", "opts", opts, "key", opts.Key)
	slog.New(slog.NewTextHandler(&logged, nil)).Info("open", "opts", opts, "key", opts.Key)
	shown := []string{fmt.Sprint(Options{Key: testKey}), fmt.Sprintf("%+v %#v %x %q %s %v", opts, opts, opts.Key, opts.Key, opts.Key, []any{opts.Key}), logged.String()}
	for _, got := range shown {
		for _, form := range []string{string(testKey), hex.EncodeToString(testKey), base64.StdEncoding.EncodeToString(testKey), "107 107"} {
			if strings.Contains(got, form) {
				t.Errorf("the key shows in %q", got)
			}
		}
	}
}

// TestAuditRotationFailureGoesOn makes the directory immutable, so that
// no rename works: appends go on in the active file, and the failure is
// logged once.
func TestAuditRotationFailureGoesOn(t *testing.T) {
	if _, err := exec.LookPath("chattr"); err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("needs root and chattr")
		}
		t.Skip("needs root and chattr")
	}
	var logged strings.Builder
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	a := reopen(t, path, Options{RotateBytes: 1024, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v %s (a file system without immutable files)", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", dir).Run() })
	appendN(t, a, 20)
	a.Close()
	if n, err := Verify(path); err != nil || n != 20 {
		t.Fatalf("Verify = %d, %v; want 20 records", n, err)
	}
	if got := strings.Count(logged.String(), "not rotated"); got != 1 {
		t.Errorf("logged %d warnings; want 1:\n%s", got, &logged)
	}
}

// The audit log's items in the keyring are names no config or `secret set`
// may use.
func TestKeyringNamesReserved(t *testing.T) {
	for _, name := range []string{KeyName, CheckpointName(t.TempDir())} {
		if err := secrets.CheckUserName(name); err == nil {
			t.Errorf("secrets.CheckUserName(%q) = nil; want it reserved", name)
		}
	}
}

// TestAuditHeadSyncedOffTheAppendPath: the head file's fsync runs on the
// Log's goroutine after the Append returns; the head names the last
// record at once (it is written before), and at Close. A head fsync that
// failed stops the log at the next Append, as one on the Append's path
// did.
func TestAuditHeadSyncedOffTheAppendPath(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey})
	appendN(t, a, 4)
	if h, err := readHead(path); err != nil || h.Seq != a.ch.seq {
		t.Fatalf("head after 4 appends: %+v, %v; want seq %d", h, err, a.ch.seq)
	}
	a.heads.mu.Lock()
	a.heads.err = errors.New("input/output error")
	a.heads.mu.Unlock()
	err := a.Append(&Record{Kind: KindIntent, Handle: "h9"})
	var we *WriteError
	if !errors.As(err, &we) || !we.Stopped || we.Op != "head" {
		t.Fatalf("Append after a failed head fsync: %v; want a Stopped *WriteError of the head", err)
	}
	b, path2 := openTestLog(t, Options{Key: testKey})
	appendN(t, b, 3)
	last := b.ch.seq // after the key record
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err := readHead(path2); err != nil || h.Seq != last {
		t.Errorf("head after Close: %+v, %v; want seq %d", h, err, last)
	}
}
