package audit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
)

// SealResult is what Seal did.
type SealResult struct {
	// Dir is the directory the damaged log's files were moved into.
	Dir string
	// Damage is the fault that made the log unusable.
	Damage *DamagedError
	// Record is the seal record that starts the new chain.
	Record Record
	// Checkpoint is the new chain's: save it in place of the old one. nil
	// without a key.
	Checkpoint *Checkpoint
}

// Seal is the way out of a damaged log. Under the lock, it verifies the
// log at path as VerifyWith does; if that finds a *DamagedError, it moves
// all the log's files (rotated, active, head) into a new directory beside
// it, named audit-sealed-TIME, and starts a new chain whose first record,
// of kind "seal", names that directory, the damage, and the last good
// record. A log that verifies is left alone, with an error.
//
// Processes appending to the log meanwhile find their file moved, and
// append no more until they are restarted.
func Seal(ctx context.Context, path string, opts VerifyOptions) (*SealResult, error) {
	lock, err := os.OpenFile(lockPath(path), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer lock.Close()
	if err := lockFile(lock, true); err != nil {
		return nil, fmt.Errorf("audit log: lock: %w", err)
	}
	defer unlockFile(lock)

	snap, err := takeSnapshot(path, false)
	if err != nil {
		return nil, err
	}
	rep, err := snap.verify(ctx, opts)
	snap.close() // before the files are moved: Windows renames no open file
	var damage *DamagedError
	switch {
	case err == nil && opts.Key == nil && rep.KeyedFrom != 0:
		return nil, fmt.Errorf("audit log %s verifies as far as it can be checked without the key: %w (its macs, from record %d on, need it)", path, ErrNoKey, rep.KeyedFrom)
	case err == nil:
		return nil, fmt.Errorf("audit log %s verifies: there is nothing to seal", path)
	case !errors.As(err, &damage):
		return nil, err
	}

	now := time.Now().UTC()
	dir, err := sealDir(filepath.Dir(path), now)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	moved := []string{headPath(path)}
	for _, sf := range snap.files {
		moved = append(moved, sf.path)
	}
	for _, p := range moved {
		if err := os.Rename(p, filepath.Join(dir, filepath.Base(p))); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("audit log: moving the damaged files aside: %w", err)
		}
	}
	if err := errors.Join(syncDir(dir), syncDir(filepath.Dir(path))); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}

	reason, _ := cutString(damage.Reason, fieldBytes)
	rec := Record{Seq: 1, Time: now, Kind: KindSeal, Owner: owner.Self(),
		Reason: "the chain before this one was damaged; its files were moved aside and this chain starts anew",
		Sealed: &Sealed{Dir: filepath.Base(dir), File: filepath.Base(damage.File), Line: damage.Line, Reason: reason,
			LastSeq: damage.LastSeq, LastHash: damage.LastHash}}
	sign := newSigner(opts.Key)
	if sign != nil {
		rec.KeyID = sign.id
	}
	var buf bytes.Buffer
	hash, mac, err := encodeRecord(&buf, &rec, sign)
	if err != nil {
		return nil, err
	}
	if err := writeNew(path, buf.Bytes()); err != nil {
		return nil, err
	}
	if err := writeNew(headPath(path), encodeHead(1, hash, sign)); err != nil {
		return nil, err
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	res := &SealResult{Dir: dir, Damage: damage, Record: rec}
	if mac != "" {
		res.Checkpoint = &Checkpoint{Seq: 1, MAC: mac}
	}
	return res, nil
}

// sealDir makes the directory the files of a damaged log go to.
func sealDir(parent string, now time.Time) (string, error) {
	base := filepath.Join(parent, "audit-sealed-"+now.Format("20060102T150405Z"))
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o700)
		if !os.IsExist(err) {
			return dir, err
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// writeNew creates the file at path, which must not exist, with data, on
// disk.
func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}
