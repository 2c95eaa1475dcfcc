package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A log at dir/audit.jsonl is these files:
//
//	audit.jsonl                       the active file, appended to
//	audit.00000000000000012345.jsonl  a rotated file, named by its first seq
//	audit.jsonl.head                  the last record's seq and hash (and MAC)
//	audit.jsonl.lock                  locked by every writer while it appends
//
// The chain runs through the rotated files in the order of their first seq,
// then the active file.

// Path is where the audit log of a state directory lives.
func Path(stateDir string) string {
	return filepath.Join(stateDir, "audit.jsonl")
}

func headPath(path string) string { return path + ".head" }
func lockPath(path string) string { return path + ".lock" }

const seqDigits = 20

// rotatedPath is the name the active file at path gets when it is rotated
// and its first record is first.
func rotatedPath(path string, first int64) string {
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s.%0*d%s", strings.TrimSuffix(path, ext), seqDigits, first, ext)
}

// logFile is one file of a log.
type logFile struct {
	path  string
	first int64 // the seq its name gives; 0 for the active file
}

// listFiles returns the files of the log at path, oldest first: the
// rotated ones, then the active one (which need not exist).
func listFiles(path string) ([]logFile, error) {
	ext := filepath.Ext(path)
	stem := strings.TrimSuffix(path, ext)
	names, err := filepath.Glob(escapeGlob(stem) + ".*" + escapeGlob(ext))
	if err != nil {
		return nil, err
	}
	var files []logFile
	for _, name := range names {
		digits := strings.TrimSuffix(strings.TrimPrefix(name, stem+"."), ext)
		first, err := strconv.ParseInt(digits, 10, 64)
		if len(digits) != seqDigits || err != nil || first < 1 {
			continue
		}
		files = append(files, logFile{path: name, first: first})
	}
	slices.SortFunc(files, func(a, b logFile) int { return int(min(max(a.first-b.first, -1), 1)) })
	return append(files, logFile{path: path}), nil
}

func escapeGlob(s string) string {
	r := strings.NewReplacer(`*`, `\*`, `?`, `\?`, `[`, `\[`)
	if filepath.Separator == '\\' {
		// Backslash separates paths there and escapes nothing.
		r = strings.NewReplacer(`*`, `[*]`, `?`, `[?]`, `[`, `[[]`)
	}
	return r.Replace(s)
}

// headRecord is the head file's content, padded to headSize so it is
// rewritten in place.
type headRecord struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
	// MAC authenticates seq and hash under the log's key; "" in an
	// unkeyed log.
	MAC string `json:"mac,omitempty"`
}

const headSize = 256

// readHead reads the head file of the log at path; a missing or empty one
// is the zero headRecord.
func readHead(path string) (headRecord, error) {
	var h headRecord
	raw, err := os.ReadFile(headPath(path))
	if err != nil && !os.IsNotExist(err) {
		return h, fmt.Errorf("audit log: %w", err)
	}
	if raw = bytes.TrimRight(raw, " \n\x00"); len(raw) > 0 {
		if err := json.Unmarshal(raw, &h); err != nil || h.Seq < 0 {
			return h, &DamagedError{File: headPath(path), Reason: "the head file is not a head record"}
		}
	}
	return h, nil
}

func headMAC(s *signer, seq int64, hash string) string {
	return s.mac(fmt.Appendf(nil, "actiongw audit head\n%d\n%s", seq, hash))
}

// encodeHead is the head file's content for record seq with hash, MAC'd
// by s.
func encodeHead(seq int64, hash string, s *signer) []byte {
	h := headRecord{Seq: seq, Hash: hash}
	if s != nil {
		h.MAC = headMAC(s, seq, hash)
	}
	b, _ := json.Marshal(h)
	b = append(b, bytes.Repeat([]byte(" "), headSize-1-len(b))...)
	return append(b, '\n')
}

// maxHeadLag is how many records the head file may lag behind the log: a
// writer syncs its batch, then the head, and may die in between.
const maxHeadLag = maxBatch + 2

// checkHead checks the head file h against the chain c has followed to
// the end of the log. The head may lag behind by one batch; it may not be
// ahead, name another record, or, in the keyed part, lack its MAC.
func checkHead(c *chain, h headRecord, path string, hashOf func(int64) (string, bool)) error {
	bad := func(format string, a ...any) error {
		return &DamagedError{File: headPath(path), Reason: fmt.Sprintf(format, a...), LastSeq: c.seq, LastHash: c.hash}
	}
	switch {
	case h.Seq > c.seq:
		return bad("the head file records %d records, the log has %d: records were removed from the end", h.Seq, c.seq)
	case c.seq-h.Seq > maxHeadLag:
		return bad("the head file records %d records, the log has %d: the head file was replaced by an old one", h.Seq, c.seq)
	}
	if h.Seq > 0 {
		hash, ok := hashOf(h.Seq)
		if !ok || hash != h.Hash {
			return bad("the head file names record %d with another hash: the log's end was rewritten", h.Seq)
		}
	}
	if c.sign == nil || c.keyedFrom == 0 {
		return nil
	}
	switch {
	case h.MAC != "":
		if !hmacEqual(h.MAC, headMAC(c.sign, h.Seq, h.Hash)) {
			return bad("its mac does not match: it was forged, or the key given is not the one that wrote it")
		}
	// A head written before the key record, which was written alone,
	// by a process that died before it wrote the head.
	case h.Seq == c.keyedFrom-1 && c.seq == c.keyedFrom:
	default:
		return bad("it has no mac, though the log is keyed from record %d: it was written without the key", c.keyedFrom)
	}
	return nil
}
