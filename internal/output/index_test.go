package output

import (
	"fmt"
	"runtime"
	"testing"
)

// heapInUse is the heap in use after a collection.
func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestSpoolMemoryFlat: the spool held every finished action whole, with
// its captures (their previews, hashes and redactor streams), about 10 KB
// each until spool_ttl. Now it holds the newest ones whole, and of each
// other one what eviction needs: what it holds grows by tens of bytes an
// action, and every action stays readable.
func TestSpoolMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("6000 actions on disk")
	}
	sp, err := OpenSpool(t.TempDir(), SpoolOptions{RetainHeadBytes: 1 << 20, RetainTailBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	var handles []string
	run := func(n int) {
		for range n {
			act := sp.Begin("ssh_exec", "web1")
			act.Capture("stdout", nil, previews).Write([]byte(fmt.Sprintf("action %d\n", len(handles))))
			act.Capture("stderr", nil, previews)
			act.Finish()
			handles = append(handles, act.Handle())
		}
	}
	run(2000)
	at2k := heapInUse()
	run(4000)
	at6k := heapInUse()
	// Pages of 8 KiB and the finished list's doubling make the figure
	// coarse: the bound is generous, and far below what one whole action
	// took.
	const perAction = 200
	if grew := at6k - at2k; grew > 4000*perAction {
		t.Errorf("the heap in use grew by %d bytes (%d an action) from 2000 to 6000 finished actions; want at most %d an action",
			grew, grew/4000, perAction)
	}
	t.Logf("heap in use: %d bytes after 2000 actions, %d after 6000", at2k, at6k)
	for _, i := range []int{0, 1999, len(handles) - recentWhole - 1, len(handles) - 1} {
		p, err := sp.Read(t.Context(), handles[i], "stdout", 0, false, 0, 0)
		if want := fmt.Sprintf("action %d\n", i); err != nil || p.Data != want {
			t.Errorf("read action %d: %+v, %v; want %q", i, p, err, want)
		}
	}
	checkBooks(t, sp)
}
