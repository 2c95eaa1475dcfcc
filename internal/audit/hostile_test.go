package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAuditHostileLongFields appends what an agent can send: a 4 MB
// command, and 4 MB of characters JSON escapes to six bytes each. Every
// record stays within MaxLineBytes, keeps a valid prefix and the whole
// field's size and hash, and the log verifies and opens.
func TestAuditHostileLongFields(t *testing.T) {
	const size = 4 << 20
	tests := []struct{ name, value string }{
		{"4 MB of a", strings.Repeat("a", size)},
		{"4 MB of <", strings.Repeat("<", size)},
		{"4 MB of control characters", strings.Repeat("\x01", size)},
		{"4 MB of invalid UTF-8", strings.Repeat("\xff", size)},
		{"4 MB of line separators", strings.Repeat("\u2028", size/3)},
		{"4 MB of quotes and backslashes", strings.Repeat(`"\`, size/2)},
		{"4 MB of é", strings.Repeat("é", size/2)},
	}
	a, path := openTestLog(t, Options{Key: testKey})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &Record{Kind: KindIntent, Handle: "h", Tool: "ssh_exec", Target: tt.value, Command: tt.value, Reason: tt.value}
			if err := a.Append(rec); err != nil {
				t.Fatal(err)
			}
			l := lines(t, path)
			last := l[len(l)-1]
			if len(last) > MaxLineBytes {
				t.Fatalf("record of %d bytes; want at most %d", len(last), MaxLineBytes)
			}
			var got Record
			if err := json.Unmarshal([]byte(last), &got); err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256([]byte(tt.value))
			valid := strings.Map(func(r rune) rune { return r }, tt.value) // each bad byte a U+FFFD, as JSON has it
			for _, f := range []struct{ name, value string }{{"command", got.Command}, {"target", got.Target}, {"reason", got.Reason}} {
				cut, ok := got.Cut[f.name]
				if !ok || cut.Bytes != int64(len(tt.value)) || cut.SHA256 != hex.EncodeToString(sum[:]) {
					t.Errorf("cut[%s] = %+v; want %d bytes and the value's sha256", f.name, cut, len(tt.value))
				}
				if f.value == "" || !utf8.ValidString(f.value) || !strings.HasPrefix(valid, f.value) {
					t.Errorf("%s holds %d bytes, not a valid prefix of the value", f.name, len(f.value))
				}
			}
		})
	}
	if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil {
		t.Fatal(err)
	}
	a.Close()
	reopen(t, path, Options{Key: testKey})
}

// TestAuditHostileLongLine is the line the version before wrote for a
// command of 4.1 MB of <: 24.6 MB. Verify reports it by line without
// holding it; Open refuses the log with the way out; Seal takes it.
func TestAuditHostileLongLine(t *testing.T) {
	a, path := openTestLog(t, Options{})
	appendN(t, a, 3)
	a.Close()
	long, _ := json.Marshal(&Record{Seq: 4, Kind: KindIntent, Command: strings.Repeat("<", 4100000)})
	if len(long) < 24_000_000 {
		t.Fatalf("the long line is %d bytes", len(long))
	}
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(append(long, '\n'))
	f.WriteString(`{"seq":5}` + "\n")
	f.Close()
	long = nil

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Verify(path)
	runtime.ReadMemStats(&after)
	mustDamage(t, err, "audit.jsonl", 4, "longer than any record actiongw writes")
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("Verify allocated %d bytes for a 24 MB line; want it skipped, not held", alloc)
	}
	_, err = OpenWith(context.Background(), path, Options{})
	mustDamage(t, err, "audit.jsonl", 4, "longer than any record actiongw writes")
	res, err := Seal(context.Background(), path, VerifyOptions{})
	if err != nil || res.Record.Sealed.LastSeq != 3 || res.Record.Sealed.Line != 4 {
		t.Fatalf("Seal = %+v, %v; want the log good up to record 3", res, err)
	}
	b := reopen(t, path, Options{})
	appendN(t, b, 1)
	if n, err := Verify(path); err != nil || n != 2 {
		t.Errorf("after seal: Verify = %d, %v; want 2 records", n, err)
	}
}

// rechain recomputes every prev from line from on, and the head file,
// as someone without the key would after editing the log.
func rechain(t *testing.T, path string, l []string, from int) {
	t.Helper()
	for i := max(from, 1); i < len(l); i++ {
		var r Record
		if err := json.Unmarshal([]byte(l[i]), &r); err != nil {
			t.Fatal(err)
		}
		l[i] = strings.Replace(l[i], `"prev":"`+r.Prev+`"`, `"prev":"`+lineHash([]byte(l[i-1]))+`"`, 1)
	}
	writeLines(t, path, l)
	var last Record
	json.Unmarshal([]byte(l[len(l)-1]), &last)
	os.WriteFile(headPath(path), encodeHead(last.Seq, lineHash([]byte(l[len(l)-1])), nil), 0o600)
}

// TestAuditHostileRewrite edits a record and recomputes every hash after
// it, and the head file: only the key tells.
func TestAuditHostileRewrite(t *testing.T) {
	for _, key := range [][]byte{testKey, nil} {
		var cp Checkpoint
		a, path := openTestLog(t, Options{Key: key, SaveCheckpoint: func(c Checkpoint) { cp = c }})
		appendN(t, a, 6)
		a.Close()
		l := lines(t, path)
		l[2] = strings.Replace(l[2], "echo hunter22", "echo harmless", 1)
		rechain(t, path, l, 3)
		if key == nil {
			rep, err := VerifyWith(context.Background(), path, VerifyOptions{})
			if err != nil || !strings.Contains(rep.String(), "the log is not keyed: anyone who could write the state directory could have rewritten it") {
				t.Errorf("unkeyed rewrite: %v\n%s\nwant it to pass and say what that does not prove", err, rep)
			}
			continue
		}
		_, err := VerifyWith(context.Background(), path, VerifyOptions{Key: key, Checkpoint: &cp})
		mustDamage(t, err, "audit.jsonl", 3, "mac does not match")
		_, err = OpenWith(context.Background(), path, Options{Key: key, Checkpoint: &cp})
		mustDamage(t, err, "audit.jsonl", 3, "mac does not match")
		// Without the key, verify says what it cannot tell.
		rep, err := VerifyWith(context.Background(), path, VerifyOptions{})
		if err != nil || !strings.Contains(rep.String(), "carry macs, not checked") {
			t.Errorf("without the key: %v\n%s", err, rep)
		}

		// Every mac stripped makes the log look unkeyed: the checkpoint
		// tells.
		l = lines(t, path)
		for i := range l {
			if _, body, ok := splitMAC([]byte(l[i])); ok {
				l[i] = string(body) + "}"
			}
		}
		rechain(t, path, l, 0)
		_, err = OpenWith(context.Background(), path, Options{Key: key, Checkpoint: &cp})
		mustDamage(t, err, "audit.jsonl", 0, "is not the one the checkpoint")
		rep, err = VerifyWith(context.Background(), path, VerifyOptions{Key: key})
		if err != nil || !strings.Contains(rep.String(), "no record carries a mac") {
			t.Errorf("macs stripped, no checkpoint: %v\n%s", err, rep)
		}
	}
}

// TestAuditHostileEmptiedOrCut empties, removes or cuts the log: the head
// file or the checkpoint tells, and without them verify says so.
func TestAuditHostileEmptiedOrCut(t *testing.T) {
	tests := []struct {
		name   string
		tamper func(t *testing.T, path string, oldHead []byte)
		file   string
		want   string
		// caught is whether the files alone show it, without the checkpoint.
		caught bool
	}{
		{"both files emptied", func(t *testing.T, path string, _ []byte) {
			os.WriteFile(path, nil, 0o600)
			os.WriteFile(headPath(path), nil, 0o600)
		}, "audit.jsonl", "records were removed (the log was emptied or cut short)", false},
		{"both files removed", func(t *testing.T, path string, _ []byte) {
			os.Remove(path)
			os.Remove(headPath(path))
		}, "audit.jsonl", "records were removed (the log was emptied or cut short)", false},
		{"last records cut", func(t *testing.T, path string, _ []byte) {
			l := lines(t, path)
			writeLines(t, path, l[:len(l)-2])
		}, "audit.jsonl.head", "records were removed from the end", true},
		{"last records cut, head forged without the key", func(t *testing.T, path string, _ []byte) {
			l := lines(t, path)
			rechain(t, path, l[:len(l)-2], len(l))
		}, "audit.jsonl.head", "it has no mac", true},
		{"last records cut, an old head put back", func(t *testing.T, path string, oldHead []byte) {
			l := lines(t, path)
			writeLines(t, path, l[:len(l)-4])
			os.WriteFile(headPath(path), oldHead, 0o600)
		}, "audit.jsonl", "records were removed (the log was emptied or cut short)", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cp Checkpoint
			a, path := openTestLog(t, Options{Key: testKey, SaveCheckpoint: func(c Checkpoint) { cp = c }})
			appendN(t, a, 4)
			oldHead, _ := os.ReadFile(headPath(path))
			appendN(t, a, 4)
			a.Close()
			tt.tamper(t, path, oldHead)

			_, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey, Checkpoint: &cp})
			mustDamage(t, err, tt.file, 0, tt.want)
			_, err = OpenWith(context.Background(), path, Options{Key: testKey, Checkpoint: &cp})
			mustDamage(t, err, tt.file, 0, tt.want)

			rep, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey})
			if tt.caught {
				mustDamage(t, err, tt.file, 0, tt.want)
			} else if err != nil || !strings.Contains(rep.String(), "no checkpoint was given") {
				t.Errorf("without the checkpoint: %v\n%s\nwant it to pass and say what is not proved", err, rep)
			}
		})
	}
}

// TestAuditHostileForgedRecordAppended appends a record written without
// the key to a keyed log.
func TestAuditHostileForgedRecordAppended(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey})
	appendN(t, a, 2)
	a.Close()
	l := lines(t, path)
	forged, _ := json.Marshal(&Record{Seq: 4, Kind: KindOutcome, Prev: lineHash([]byte(l[2])), Handle: "h0", Status: "exited"})
	rechain(t, path, append(l, string(forged)), 4)
	_, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey})
	mustDamage(t, err, "audit.jsonl", 4, "it has no mac")
}

// TestAuditWriteErrorIsTruthful checks what each write error says about
// the log going on.
func TestAuditWriteErrorIsTruthful(t *testing.T) {
	for _, e := range []*WriteError{{Op: "write", Err: errors.New("x")}, {Op: "sync", Stopped: true, Err: errors.New("x")}} {
		msg := e.Error()
		if strings.Contains(msg, "no more records") != e.Stopped || strings.Contains(msg, "nothing of the records was kept") == e.Stopped {
			t.Errorf("%+v says %q", e, msg)
		}
	}
	if !errors.Is(&WriteError{Op: "write", Err: diskFullErr}, ErrDiskFull) || errors.Is(&WriteError{Op: "write", Err: errors.New("x")}, ErrDiskFull) {
		t.Errorf("ErrDiskFull does not match a full disk, or matches another error")
	}
}

// TestAuditWorstCaseRecordFits fills every field a caller sets with what
// escapes longest: the record still fits in MaxLineBytes.
func TestAuditWorstCaseRecordFits(t *testing.T) {
	a, path := openTestLog(t, Options{Key: testKey})
	long := strings.Repeat("\x01", 1<<20)
	code := -1 << 31
	stopped := true
	streams := map[string]Stream{}
	for i := range maxStreams {
		streams[strings.Repeat("\x01", 63)+string(rune('a'+i))] = Stream{Bytes: 1 << 62, SHA256: strings.Repeat("\x01", 64)}
	}
	rec := &Record{Kind: KindOutcome, Time: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		Handle: long, Tool: long, Target: long, Command: long, Method: long, Path: long, Decision: long, Rule: long,
		Status: long, ExitCode: &code, Signal: long, HTTPStatus: -1 << 62, Streams: streams, DurationMS: -1 << 62,
		Reason: long, RemoteStopped: &stopped}
	if err := a.Append(rec); err != nil {
		t.Fatal(err)
	}
	l := lines(t, path)
	if n := len(l[len(l)-1]); n > MaxLineBytes || n < MaxLineBytes/4 {
		t.Errorf("the worst record is %d bytes; want it within %d, and not far from it", n, MaxLineBytes)
	}
	if _, err := VerifyWith(context.Background(), path, VerifyOptions{Key: testKey}); err != nil {
		t.Fatal(err)
	}
}
