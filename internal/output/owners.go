package output

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
)

// The spool directory is shared by every process that uses it:
//
//	owner-<ID>/                 one for each process (owner.ID)
//	    spool.json              the retain sizes its files are laid out with
//	    out_<handle>/           an action
//	        meta.json           written when the action finishes
//	        <stream>.out        the retained bytes, head then tail ring
//	adopt-<ID>-<from>/          owner-<from>, while process <ID> takes it over
//	out_<handle>/               an action of a version before owner-<ID>
//
// A process makes, reads and evicts actions only in its own directory. It
// takes over the directory of a process that has ended by renaming it to
// adopt-<self>-<from>, which only one process can do, and then moves each
// action into its own directory: a finished one as it is, an unfinished one
// after writing a meta.json for what is on disk. If it ends during this,
// the adopt- directory is taken over in turn.
const (
	ownerDirPrefix = "owner-"
	adoptDirPrefix = "adopt-"
	spoolOwnerFile = "spool.json"
	// adoptEvery is how often eviction looks for processes that ended.
	adoptEvery = time.Minute
)

const idPattern = `([0-9]+(?:\.[0-9]+)?)`

var (
	ownerDirPattern = regexp.MustCompile(`^` + ownerDirPrefix + idPattern + `$`)
	adoptDirPattern = regexp.MustCompile(`^` + adoptDirPrefix + idPattern + `-` + idPattern + `$`)
)

// spoolLayout is spool.json: what recovering an unfinished action needs to
// know of the process that wrote it.
type spoolLayout struct {
	Owner           owner.ID `json:"owner"`
	RetainHeadBytes int64    `json:"retain_head_bytes"`
	RetainTailBytes int64    `json:"retain_tail_bytes"`
}

// makeOwnDir makes this process's directory. One that exists already was
// left by an earlier process with the same ID (where an ID is a bare pid)
// or an earlier Spool of this one: it is renamed to claim, for the caller
// to take over like any other.
func (s *Spool) makeOwnDir() (claim string, err error) {
	if _, err := os.Lstat(s.own); err == nil {
		claim = filepath.Join(s.dir, adoptDirPrefix+string(s.self)+"-"+string(s.self))
		if err := os.Rename(s.own, claim); err != nil {
			return "", fmt.Errorf("take over spool directory: %w", err)
		}
	}
	if err := os.Mkdir(s.own, 0o700); err != nil {
		return claim, fmt.Errorf("create spool directory: %w", err)
	}
	b, _ := json.Marshal(spoolLayout{Owner: s.self, RetainHeadBytes: s.opts.RetainHeadBytes, RetainTailBytes: s.opts.RetainTailBytes})
	if err := os.WriteFile(filepath.Join(s.own, spoolOwnerFile), b, 0o600); err != nil {
		return claim, fmt.Errorf("write spool layout: %w", err)
	}
	return claim, nil
}

// adoptLocked claims what processes that have ended left in the spool
// directory (see above) and hands it to the adopter, which moves the
// actions in on its goroutine, a batch at a time: a spool that holds many
// actions opens in the time of one rename per process that left some.
// Actions at the top, of the version before owner directories, are taken
// over only at open (legacy), at once: a process of that version that
// still runs removes them itself.
func (s *Spool) adoptLocked(legacy bool) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() {
			continue
		}
		if handlePattern.MatchString(name) {
			if legacy {
				s.adoptLegacyLocked(filepath.Join(s.dir, name), name)
			}
			continue
		}
		var by, from owner.ID
		if m := ownerDirPattern.FindStringSubmatch(name); m != nil {
			by, from = owner.ID(m[1]), owner.ID(m[1])
		} else if m := adoptDirPattern.FindStringSubmatch(name); m != nil {
			by, from = owner.ID(m[1]), owner.ID(m[2])
		} else {
			continue
		}
		if by == s.self || s.alive(by) {
			continue
		}
		claim := filepath.Join(s.dir, adoptDirPrefix+string(s.self)+"-"+string(from))
		if os.Rename(filepath.Join(s.dir, name), claim) != nil {
			continue // another process took it first
		}
		s.claimLocked(claim)
	}
}

// claimLocked hands claim, a directory this process has taken over, to
// the adopter.
func (s *Spool) claimLocked(claim string) {
	if len(s.claims) == 0 {
		s.settled = make(chan struct{})
	}
	s.claims = append(s.claims, claim)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// adoptBatch is how many actions the adopter moves in under one hold of
// the spool's lock: a call that needs the lock waits for at most one.
const adoptBatch = 64

// adopt is the adopter's goroutine: it moves the actions of each claimed
// directory into this process's, until Close.
func (s *Spool) adopt() {
	defer close(s.adopted)
	for {
		s.mu.Lock()
		if len(s.claims) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-s.closing:
				return
			}
		}
		claim := s.claims[0]
		s.mu.Unlock()
		if !s.adoptDir(claim) {
			return
		}
		os.RemoveAll(claim)
		s.mu.Lock()
		s.claims = s.claims[1:]
		if len(s.claims) == 0 {
			close(s.settled)
		}
		s.mu.Unlock()
	}
}

// adoptDir moves the actions of claim into this process's directory, a
// batch at a time, each batch taking its place in the eviction order. It
// returns false when Close stopped it.
func (s *Spool) adoptDir(claim string) bool {
	layout := readLayout(claim)
	entries, _ := os.ReadDir(claim)
	for len(entries) > 0 {
		select {
		case <-s.closing:
			return false
		default:
		}
		n := min(len(entries), adoptBatch)
		batch := make([]*Action, 0, n)
		s.mu.Lock()
		for _, e := range entries[:n] {
			if a := s.adoptOneLocked(claim, e, layout); a != nil {
				batch = append(batch, a)
			}
		}
		s.mergeFinishedLocked(batch)
		s.evictLocked()
		s.mu.Unlock()
		entries = entries[n:]
	}
	return true
}

// readLayout reads the spool.json of claim; nil when it has none.
func readLayout(claim string) *spoolLayout {
	b, err := os.ReadFile(filepath.Join(claim, spoolOwnerFile))
	if err != nil {
		return nil
	}
	layout := new(spoolLayout)
	if json.Unmarshal(b, layout) != nil {
		return nil
	}
	return layout
}

// adoptOneLocked moves the action e of claim into this process's
// directory and makes it readable here, but not yet evictable: the caller
// merges it into s.finished. It returns nil for an entry that is no
// action, or one taken over already (by adoptHandleLocked: the entry is
// gone from claim, and neither loads nor recovers).
func (s *Spool) adoptOneLocked(claim string, e fs.DirEntry, layout *spoolLayout) *Action {
	name := e.Name()
	if !e.IsDir() || !handlePattern.MatchString(name) {
		return nil
	}
	src := filepath.Join(claim, name)
	a, err := s.load(src, name)
	if err != nil && layout != nil {
		a, err = s.recoverAction(src, name, layout)
	}
	if err == nil {
		err = s.moveInLocked(a, false)
	}
	if err != nil {
		os.RemoveAll(src)
		return nil
	}
	return a
}

// adoptHandleLocked takes over the action handle at once if a claimed
// directory the adopter has not reached holds it: a read need not wait
// for the adopter.
func (s *Spool) adoptHandleLocked(handle string) *Action {
	for _, claim := range s.claims {
		fi, err := os.Lstat(filepath.Join(claim, handle))
		if err != nil {
			continue
		}
		if a := s.adoptOneLocked(claim, fs.FileInfoToDirEntry(fi), readLayout(claim)); a != nil {
			s.mergeFinishedLocked([]*Action{a})
			return a
		}
	}
	return nil
}

// Close stops the adopter and waits for it. What it has not moved in yet
// stays claimed, for a later process to take over. The spool is not used
// after Close.
func (s *Spool) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	<-s.adopted
}

// adoptLegacyLocked takes over an action a version before owner
// directories left at the top of the spool directory: it loads if it
// finished, and is removed otherwise, as that version did at its start.
func (s *Spool) adoptLegacyLocked(dir, handle string) {
	a, err := s.load(dir, handle)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Lstat(dir); serr != nil {
				return // another process moved it meanwhile
			}
		}
		os.RemoveAll(dir)
		return
	}
	s.moveInLocked(a, true) // fails when another process took it first
}

// moveInLocked moves a loaded action into this process's directory, where
// a read finds it (loadOwnLocked); evictable too, with evictable (else the
// caller merges it into s.finished).
func (s *Spool) moveInLocked(a *Action, evictable bool) error {
	dst := filepath.Join(s.own, a.handle)
	if err := os.Rename(a.dir, dst); err != nil {
		return err
	}
	a.dir = dst
	s.disk.Add(a.diskBytes())
	if evictable {
		s.addFinishedLocked(a)
	}
	return nil
}

// errInterrupted is the spool error of a recovered stream.
const errInterrupted = "interrupted: the process that ran the action ended before it finished; " +
	"only the start of the stream, as far as it was on disk, was recovered, and the stream may have been longer"

// recoverAction makes a finished action of one in dir whose process ended before
// it finished: each stream's total is its file's size, of which the head
// is readable; the tail ring is not, as its order is unknown without the
// stream's total. It writes the action's meta.json.
func (s *Spool) recoverAction(dir, handle string, layout *spoolLayout) (*Action, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	m := actionMeta{Handle: handle, Interrupted: true}
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), spoolStreamFileSuffix)
		if !ok || !streamNamePattern.MatchString(name) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		if t := fi.ModTime(); t.After(m.Finished) {
			m.Finished = t
		}
		m.Streams = append(m.Streams, streamMeta{
			Name:     name,
			HeadCap:  layout.RetainHeadBytes,
			TailCap:  layout.RetainTailBytes,
			Total:    fi.Size(),
			HeadKept: min(fi.Size(), layout.RetainHeadBytes),
			TailLost: true,
			Error:    errInterrupted,
		})
	}
	if m.Finished.IsZero() {
		fi, err := os.Stat(dir)
		if err != nil {
			return nil, err
		}
		m.Finished = fi.ModTime()
	}
	// The start time is not on disk; the zero time says so.
	if _, err := writeMeta(dir, &m); err != nil {
		return nil, err
	}
	return s.load(dir, handle)
}

// evictLocked takes over what ended processes left (at most every
// adoptEvery), then removes finished actions past their TTL, then the
// oldest finished ones while the spool is over its disk cap. It costs
// what it removes, not what the spool holds: it is called on every action
// and every read.
func (s *Spool) evictLocked() {
	now := s.now()
	if !now.Before(s.nextAdopt) {
		s.adoptLocked(false)
		s.nextAdopt = now.Add(adoptEvery)
	}
	for len(s.finished) > 0 {
		expired := s.opts.TTL > 0 && now.Sub(s.finished[0].finishedTime()) > s.opts.TTL
		over := s.opts.MaxBytes > 0 && s.usedLocked() > s.opts.MaxBytes && len(s.finished) > s.opts.KeepNewest
		switch {
		case expired:
			s.removeOldestLocked(evictedTTL)
		case over:
			s.removeOldestLocked(evictedCap)
		default:
			return
		}
	}
}

// Why an action's output is gone, in the spool_error of a result built
// after its eviction.
const (
	evictedTTL     = "not kept: the output expired (older than spool_ttl) and was removed from the spool"
	evictedCap     = "not kept: newer actions' output took its place in the spool (spool_max_bytes); counts and sha256 are complete"
	evictedReclaim = "not kept: removed from the spool to free disk space when the disk was full; counts and sha256 are complete"
)

// usedLocked is the disk the spool takes as MaxBytes counts it: the
// actions, plus the spool directory, this process's in it, and its
// spool.json.
func (s *Spool) usedLocked() int64 { return 3*s.block + s.disk.Load() }

// Reclaim frees disk space after a write failed for want of it: it takes
// over what processes that have ended left in the spool, then evicts the
// oldest finished actions, this process's included, until need bytes are
// freed (as MaxBytes counts them) or no finished action is left. It never
// touches a running action, nor the actions of another process that runs.
// It returns the bytes freed; need <= 0 frees nothing.
func (s *Spool) Reclaim(need int64) (freed int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.adoptLocked(false)
	s.nextAdopt = s.now().Add(adoptEvery)
	for freed < need && len(s.finished) > 0 {
		freed += s.removeOldestLocked(evictedReclaim)
	}
	return freed
}
