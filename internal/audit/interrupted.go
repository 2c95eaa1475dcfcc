package audit

import (
	"cmp"
	"fmt"
	"slices"
)

// RecordInterrupted appends, for every intent whose process has ended
// without writing its outcome (killed, or the machine stopped), an outcome
// with status "interrupted" that says what is known, and returns those
// outcomes for the caller to log. An intent of a process that still runs
// is left alone, and so is a denied one (its action never ran). Call it at
// start, after OpenWith; several processes may call it at once: each
// intent gets one outcome.
func (a *Log) RecordInterrupted() ([]Record, error) {
	a.commitMu.Lock()
	defer a.commitMu.Unlock()
	if a.failed != nil {
		return nil, a.failed
	}
	if a.f == nil {
		return nil, ErrClosed
	}
	if err := lockFile(a.lock, true); err != nil {
		return nil, &WriteError{Op: "lock", Err: err}
	}
	defer unlockFile(a.lock)
	if err := a.sync(); err != nil {
		return nil, err
	}
	var dead []pendingIntent
	for _, p := range a.ch.pending {
		if !p.owner.Alive() {
			dead = append(dead, p)
		}
	}
	return a.writeInterrupted(dead)
}

// writeInterrupted writes an outcome "interrupted" for each of dead, in
// the order of their intents, under commitMu and the lock, after sync.
func (a *Log) writeInterrupted(dead []pendingIntent) ([]Record, error) {
	slices.SortFunc(dead, func(x, y pendingIntent) int { return cmp.Compare(x.seq, y.seq) })
	var out []Record
	for chunk := range slices.Chunk(dead, maxBatch) {
		recs := make([]*Record, len(chunk))
		for i, p := range chunk {
			who := fmt.Sprintf("process %s", p.owner)
			if p.owner == "" {
				who = "an actiongw that did not record its process"
			}
			r, err := prepare(&Record{Kind: KindOutcome, Handle: p.handle, Tool: p.tool, Target: p.target, Status: StatusInterrupted,
				Reason: fmt.Sprintf("%s wrote the intent (record %d) and ended without writing how the action ended (it was killed, or the machine stopped): whether the action ran, and how far, is not known", who, p.seq)}, nil)
			if err != nil {
				return out, err
			}
			recs[i] = r
		}
		if err := a.write(recs); err != nil {
			return out, err
		}
		for _, r := range recs {
			out = append(out, *r)
		}
	}
	return out, nil
}
