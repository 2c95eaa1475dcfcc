package audit

import (
	"strings"
	"sync"
	"testing"
)

// TestWritten: Options.Written gets every line this process writes, the
// key record included, in the file's order, as the file has it
// (redacted, without the newline); lines another process appended are
// not its to give.
func TestWritten(t *testing.T) {
	var (
		mu  sync.Mutex
		got []string
	)
	written := func(line []byte) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(line))
	}
	a, path := openTestLog(t, Options{Key: testKey, Redact: redactPW, Written: written})
	var wg sync.WaitGroup
	for range 8 { // appends that share commits
		wg.Go(func() { appendN(t, a, 10) })
	}
	wg.Wait()
	other := reopen(t, path, Options{Key: testKey})
	appendN(t, other, 2)
	appendN(t, a, 2)
	a.Close()

	file := lines(t, path)
	want := append(file[:81:81], file[83:]...) // less the other process's two
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Written got %d lines:\n%s\nwant %d, the file's own:\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
	if !strings.Contains(got[0], `"kind":"key"`) || strings.Contains(strings.Join(got, ""), "hunter22") {
		t.Errorf("first line %s; want the key record, and nothing unredacted", got[0])
	}
}
