package output

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// entry is what the spool keeps in memory of each finished action: what
// eviction needs, and no pointer, so that the collector never looks into
// it. The rest is on disk, in the action's meta.json; the spool holds the
// whole Action of the newest ones only (recentWhole).
type entry struct {
	finished int64 // UnixNano
	disk     int64 // Action.diskBytes, which no longer changes
	id       [handleRandomBytes]byte
}

func newEntry(a *Action) entry {
	e := entry{finished: a.meta.Finished.UnixNano(), disk: a.diskBytes()}
	handleEncoding.Decode(e.id[:], []byte(strings.ToUpper(a.handle[len(handlePrefix):])))
	return e
}

func (e *entry) handle() string {
	return handlePrefix + strings.ToLower(handleEncoding.EncodeToString(e.id[:]))
}

// recentWhole is how many of its newest finished actions, at least, the
// spool keeps whole in memory (their streams, not their captures), and
// KeepNewest if more: a read of them needs no disk, and evicting one tells
// its captures (spoolStream.evicted), so that the result its action builds
// after its Finish says the output is gone rather than naming it. An
// action falls out of them after this many more have finished, long after
// its result was built. About a kilobyte each.
const recentWhole = 256

// keepRecentLocked keeps a, which just finished, among the recent ones,
// and lets the oldest of them be read from disk from now on. One whose
// meta.json could not be written stays in actions: only memory has it.
func (s *Spool) keepRecentLocked(a *Action) {
	if a.dirErr != nil {
		return
	}
	s.recent = append(s.recent, a)
	if len(s.recent) <= max(recentWhole, s.opts.KeepNewest) {
		return
	}
	old := s.recent[0]
	s.recent[0] = nil // not kept alive by the array behind the slice
	s.recent = s.recent[1:]
	if s.actions[old.handle] == old {
		delete(s.actions, old.handle)
	}
}

// loadOwnLocked reads the finished action handle of this process from its
// meta.json, or returns nil if it has none. The action is not kept:
// eviction removes the directory under the spool's lock, so a directory
// there is one the spool holds.
func (s *Spool) loadOwnLocked(handle string) *Action {
	a, err := s.load(filepath.Join(s.own, handle), handle)
	if err != nil {
		return nil
	}
	return a
}

// addFinishedLocked puts a finished action in s.finished, in its place by
// finish time: at the end, unless the clock went back or it was taken
// over from another process.
func (s *Spool) addFinishedLocked(a *Action) {
	e := newEntry(a)
	i, _ := slices.BinarySearchFunc(s.finished, e.finished, func(x entry, t int64) int {
		if x.finished > t {
			return 1
		}
		return -1 // equal times keep their order of arrival
	})
	s.finished = slices.Insert(s.finished, i, e)
}

// mergeFinishedLocked puts the finished actions of batch, taken over from
// other processes, in s.finished in their places by finish time, in one
// pass: inserting each on its own moves the whole slice each time.
func (s *Spool) mergeFinishedLocked(batch []*Action) {
	if len(batch) == 0 {
		return
	}
	add := make([]entry, len(batch))
	for i, a := range batch {
		add[i] = newEntry(a)
	}
	slices.SortStableFunc(add, func(x, y entry) int { return cmp.Compare(x.finished, y.finished) })
	merged := make([]entry, 0, len(s.finished)+len(add))
	i, j := 0, 0
	for i < len(s.finished) && j < len(add) {
		if add[j].finished < s.finished[i].finished {
			merged = append(merged, add[j])
			j++
		} else {
			merged = append(merged, s.finished[i])
			i++
		}
	}
	merged = append(merged, s.finished[i:]...)
	s.finished = append(merged, add[j:]...)
}

// removeOldestLocked removes the oldest finished action, for the reason
// why, and returns what it took on disk.
func (s *Spool) removeOldestLocked(why string) int64 {
	e := s.finished[0]
	s.finished = s.finished[1:]
	h := e.handle()
	if a := s.actions[h]; a != nil {
		for _, st := range a.streams {
			st.evicted(why)
		}
		delete(s.actions, h)
	}
	s.disk.Add(-e.disk)
	os.RemoveAll(filepath.Join(s.own, h))
	return e.disk
}

// finishedTime is e's finish time.
func (e *entry) finishedTime() time.Time { return time.Unix(0, e.finished) }
