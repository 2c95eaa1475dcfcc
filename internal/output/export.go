package output

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CopyFinished writes to w the bytes the spool at dir kept of stream of
// the finished action handle, whichever serve process ran it, in order,
// and calls gap for each range it did not keep. It reads the files
// alone: no Spool is opened, so nothing is adopted or evicted. An action
// still running has no record of its streams yet: ErrUnknownHandle.
func CopyFinished(dir, handle, stream string, w io.Writer, gap func(ByteRange)) error {
	if !handlePattern.MatchString(handle) {
		return &HandleError{Handle: handle, Err: ErrMalformedHandle}
	}
	metas, _ := filepath.Glob(filepath.Join(dir, ownerDirPrefix+"*", handle, spoolMetaFile))
	if len(metas) == 0 {
		return &HandleError{Handle: handle, Err: ErrUnknownHandle}
	}
	b, err := os.ReadFile(metas[0])
	if err != nil {
		return err
	}
	var a actionMeta
	if err := json.Unmarshal(b, &a); err != nil || a.Handle != handle {
		return fmt.Errorf("spool meta of %s: not readable", handle)
	}
	for _, m := range a.Streams {
		if m.Name != stream {
			continue
		}
		rs, why := m.retained()
		if why != "" {
			return fmt.Errorf("stream %s of %s: %s", stream, handle, why)
		}
		r := &streamReader{handle: handle, meta: m, release: func() {}}
		if len(rs) > 0 {
			if r.f, err = os.Open(filepath.Join(filepath.Dir(metas[0]), stream+spoolStreamFileSuffix)); err != nil {
				return err
			}
		}
		defer r.Close()
		var next int64
		buf := make([]byte, 64<<10)
		for _, br := range rs {
			if br.Start > next {
				gap(ByteRange{next, br.Start})
			}
			for off := br.Start; off < br.End; {
				n := min(int64(len(buf)), br.End-off)
				if err := r.readAt(buf[:n], off); err != nil {
					return err
				}
				if _, err := w.Write(buf[:n]); err != nil {
					return err
				}
				off += n
			}
			next = br.End
		}
		if next < m.Total {
			gap(ByteRange{next, m.Total})
		}
		return nil
	}
	return &HandleError{Handle: handle, Err: fmt.Errorf("%w %q", ErrUnknownStream, Clip(stream, 40))}
}
