package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/url"
	"slices"
	"strings"
)

// MinSecretLen is the shortest secret value a Redactor accepts. Shorter
// values would match ordinary text ("a", "ok") and make output unreadable,
// and every pattern being at least this long is what lets the scan filter
// candidate positions on a 4-byte prefix.
const MinSecretLen = 4

// ShortSecretError is returned by New for a secret value shorter
// than MinSecretLen. It names the secret, never its value.
type ShortSecretError struct {
	Name string
}

func (e *ShortSecretError) Error() string {
	return fmt.Sprintf("secret %q is shorter than %d bytes: too short to redact without mangling ordinary output", e.Name, MinSecretLen)
}

// Redactor replaces registered secret values, and their standard base64 and
// URL-encoded forms, with "[REDACTED:<name>]". It is safe for concurrent use;
// streaming state lives in the writers it makes.
//
// Matching is leftmost-longest: scanning left to right, at each position the
// longest pattern that starts there is replaced and the scan resumes after
// it. The streaming writer produces exactly the same output as Redact on the
// whole input, however the input is split into writes.
type Redactor struct {
	maxLen int
	// filter has one bit per hash of a pattern's first 4 bytes; a clear bit
	// rules a position out with one load.
	filter [filterBits / 64]uint64
	// grams has a bit set at the hash of each pattern's grams (gramMask
	// bytes long) at offsets 0 to stride-1; see scan.
	grams    [gramBits / 64]uint64
	gramMask uint32
	stride   int
	// gramOffsets maps each gram in the table to the offsets (bit d for
	// offset d) it has in some pattern, so a hit names the few start
	// positions worth checking.
	gramOffsets map[uint32]uint32
	// trie finds the longest pattern at a position; see trieNode.
	trie map[uint32]*trieNode
}

type pattern struct {
	value       []byte
	replacement []byte
}

const (
	filterLog  = 16
	filterBits = 1 << filterLog
	// maxStride bounds the grams per pattern in the table, and so its
	// false positives; the table has gramBits bits, 32 KiB to stay in L1.
	// gramOffsets keeps offsets below maxStride in a uint32.
	maxStride = 16
	gramLog   = 18
	gramBits  = 1 << gramLog
)

func prefixHash(v uint32) uint32 { return (v * 0x9E3779B1) >> (32 - filterLog) }

// Secret is one value to redact and the name its marker shows. A name may
// come with several values, such as a password and the "user:password"
// that Basic authentication encodes.
type Secret struct {
	Name  string
	Value []byte
}

// New builds a Redactor for secrets; a name may repeat, with several
// values. A value shorter than MinSecretLen is refused with a
// *ShortSecretError. No secrets give a Redactor that passes everything
// through.
func New(secrets []Secret) (*Redactor, error) {
	// A value shared by two names is redacted with the first name.
	slices.SortStableFunc(secrets, func(a, b Secret) int { return strings.Compare(a.Name, b.Name) })
	r := &Redactor{trie: make(map[uint32]*trieNode)}
	var patterns []pattern
	seen := make(map[string]bool)
	minLen := math.MaxInt
	for _, sec := range secrets {
		name, v := sec.Name, sec.Value
		if len(v) < MinSecretLen {
			return nil, &ShortSecretError{Name: name}
		}
		repl := []byte("[REDACTED:" + name + "]")
		for _, form := range secretForms(v) {
			if seen[form] {
				continue
			}
			seen[form] = true
			p := pattern{value: []byte(form), replacement: repl}
			patterns = append(patterns, p)
			r.insert(p)
			h := prefixHash(binary.LittleEndian.Uint32(p.value))
			r.filter[h/64] |= 1 << (h % 64)
			r.maxLen = max(r.maxLen, len(form))
			minLen = min(minLen, len(form))
		}
	}
	// Longer patterns allow longer grams and longer strides; see scan.
	gram := 4
	r.gramMask, r.stride = 0xFFFFFFFF, min(minLen-gram+1, maxStride)
	if minLen < 7 {
		gram = 3
		r.gramMask, r.stride = 0xFFFFFF, minLen-gram+1
	}
	r.gramOffsets = make(map[uint32]uint32)
	for _, p := range patterns {
		for off := range r.stride {
			var g [4]byte
			copy(g[:gram], p.value[off:])
			v := binary.LittleEndian.Uint32(g[:])
			r.gramOffsets[v] |= 1 << off
			h := gramHash(v)
			h1, h2 := h>>(64-gramLog), h>>(64-2*gramLog)%gramBits
			r.grams[h1/64] |= 1 << (h1 % 64)
			r.grams[h2/64] |= 1 << (h2 % 64)
		}
	}
	return r, nil
}

// trieNode is a step of 4 bytes in a trie of patterns: the node reached by a
// pattern's bytes [0, d) holds the patterns of length d to d+3 with those
// bytes, longest first, and leads on by bytes [d, d+4). Secrets that share
// a prefix ("ghp_", "AKIA") cost one map step per 4 bytes, not one
// comparison per secret.
type trieNode struct {
	ends []pattern
	next map[uint32]*trieNode
}

func (r *Redactor) insert(p pattern) {
	key := binary.LittleEndian.Uint32(p.value)
	n := r.trie[key]
	if n == nil {
		n = &trieNode{}
		r.trie[key] = n
	}
	for d := 4; len(p.value) >= d+4; d += 4 {
		key := binary.LittleEndian.Uint32(p.value[d:])
		next := n.next[key]
		if next == nil {
			if n.next == nil {
				n.next = make(map[uint32]*trieNode)
			}
			next = &trieNode{}
			n.next[key] = next
		}
		n = next
	}
	n.ends = append(n.ends, p)
	slices.SortStableFunc(n.ends, func(a, b pattern) int { return len(b.value) - len(a.value) })
}

// secretForms lists the encodings of v that are redacted: the raw value, its
// standard and URL-safe base64 (unpadded, which also covers the padded text)
// and its query and path escapes.
func secretForms(v []byte) []string {
	forms := []string{
		string(v),
		base64.RawStdEncoding.EncodeToString(v),
		base64.RawURLEncoding.EncodeToString(v),
		url.QueryEscape(string(v)),
		url.PathEscape(string(v)),
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// MaxHoldback is how many bytes a streaming redaction may hold back while it
// waits to see whether they start a secret: the longest pattern minus one.
func (r *Redactor) MaxHoldback() int {
	if r == nil || r.maxLen == 0 {
		return 0
	}
	return r.maxLen - 1
}

// Redact returns b with every secret form replaced. It returns b itself when
// nothing matched.
func (r *Redactor) Redact(b []byte) []byte {
	if r == nil || r.maxLen == 0 {
		return b
	}
	var out []byte
	matched := false
	r.scan(b, len(b), func(p []byte) {
		out = append(out, p...)
	}, &matched)
	if !matched {
		return b
	}
	return out
}

// RedactString is Redact for strings: audit lines, error messages, headers.
func (r *Redactor) RedactString(s string) string {
	if r == nil || r.maxLen == 0 {
		return s
	}
	out := r.Redact([]byte(s))
	return string(out)
}

// scan emits buf with matches replaced, deciding every position below stop.
// A match that starts below stop may end past it. Every position below stop
// must have maxLen bytes of lookahead or be at the true end of the input. It
// returns the index of the first undecided byte.
func (r *Redactor) scan(buf []byte, stop int, emit func([]byte), matched *bool) int {
	last, i := 0, 0
	// The hot loop decides a block of stride start positions with one
	// table lookup. Every pattern is at least stride+gram-1 bytes long, so
	// a pattern starting in the block contains the gram at the block's last
	// position, at an offset below stride; the table holds every pattern's
	// grams at those offsets. A miss rules out the whole block.
	g, mask, k := &r.grams, r.gramMask, r.stride
blocks:
	for i+k <= stop && i+k+3 <= len(buf) {
		// Two blocks per test while they fit: fewer branches.
		n := k
		if i+2*k <= stop && i+2*k+3 <= len(buf) {
			a := gramHash(binary.LittleEndian.Uint32(buf[i+k-1:]) & mask)
			b := gramHash(binary.LittleEndian.Uint32(buf[i+2*k-1:]) & mask)
			a1, b1 := a>>(64-gramLog), b>>(64-gramLog)
			if g[a1/64]&(1<<(a1%64))|g[b1/64]&(1<<(b1%64)) == 0 || !r.gramHit(a, b) {
				i += 2 * k
				continue
			}
			n = 2 * k
		} else if h := gramHash(binary.LittleEndian.Uint32(buf[i+k-1:]) & mask); !r.gramHit(h, h) {
			i += k
			continue
		}
		// Only the starts the gram map names can begin a pattern; take them
		// in order: blocks in turn, and in a block the highest offset first.
		for w := i + k - 1; w < i+n; w += k {
			offs := r.gramOffsets[binary.LittleEndian.Uint32(buf[w:])&mask]
			for offs != 0 {
				d := 31 - bits.LeadingZeros32(offs)
				offs &^= 1 << d
				if p := r.matchAt(buf[w-d:]); p != nil {
					emit(buf[last : w-d])
					emit(p.replacement)
					*matched = true
					i = w - d + len(p.value)
					last = i
					continue blocks
				}
			}
		}
		i += n
	}
	// Positions with fewer than 4 bytes left cannot start a pattern.
	for i < stop && i+4 <= len(buf) {
		p := r.matchAt(buf[i:])
		if p == nil {
			i++
			continue
		}
		emit(buf[last:i])
		emit(p.replacement)
		*matched = true
		i += len(p.value)
		last = i
	}
	i = max(i, stop)
	if last < i {
		emit(buf[last:i])
	}
	return i
}

// matchAt returns the longest pattern that b starts with, or nil. b must
// hold at least 4 bytes.
func (r *Redactor) matchAt(b []byte) *pattern {
	key := binary.LittleEndian.Uint32(b)
	h := prefixHash(key)
	if r.filter[h/64]&(1<<(h%64)) == 0 {
		return nil
	}
	// Deeper nodes hold longer patterns, so the last match found wins.
	var best *pattern
	n := r.trie[key]
	for d := 4; n != nil; d += 4 {
		for j := range n.ends {
			if bytes.HasPrefix(b, n.ends[j].value) {
				best = &n.ends[j]
				break
			}
		}
		if len(b) < d+4 || n.next == nil {
			break
		}
		n = n.next[binary.LittleEndian.Uint32(b[d:])]
	}
	return best
}

// gramHash gives two table indexes for a gram, in its top gramLog bits and
// the gramLog bits below them: the table is a Bloom filter with two hashes.
func gramHash(v uint32) uint64 { return uint64(v) * 0x9E3779B97F4A7C15 }

// gramHit reports whether gram hash a or b may be in the table. scan
// tests the first index inline; the second rules out most false positives
// of the first, which repeated text could otherwise hit on every line.
func (r *Redactor) gramHit(a, b uint64) bool {
	g := &r.grams
	a1, b1 := a>>(64-gramLog), b>>(64-gramLog)
	a2, b2 := a>>(64-2*gramLog)%gramBits, b>>(64-2*gramLog)%gramBits
	return g[a1/64]&(1<<(a1%64)) != 0 && g[a2/64]&(1<<(a2%64)) != 0 ||
		g[b1/64]&(1<<(b1%64)) != 0 && g[b2/64]&(1<<(b2%64)) != 0
}

// Stream is the streaming form of a Redactor: it passes redacted bytes to
// an emit function, holding back at most MaxHoldback bytes between writes,
// and produces exactly what Redact would on the whole input. A Stream is
// used by one goroutine.
type Stream struct {
	r     *Redactor
	emit  func([]byte)
	carry []byte
}

// NewStream returns a Stream that emits to emit; a nil Redactor passes
// everything through.
func (r *Redactor) NewStream(emit func([]byte)) *Stream {
	w := &Stream{r: r, emit: emit}
	if r != nil && r.maxLen > 0 {
		w.carry = make([]byte, 0, 2*r.maxLen)
	}
	return w
}

// Write redacts p; it always returns len(p), nil.
func (w *Stream) Write(p []byte) (int, error) {
	w.write(p)
	return len(p), nil
}

func (w *Stream) write(p []byte) {
	r := w.r
	if r == nil || r.maxLen == 0 {
		if len(p) > 0 {
			w.emit(p)
		}
		return
	}
	var matched bool
	m := r.maxLen
	if len(w.carry) > 0 {
		// Decide the held-back positions with just enough of p appended;
		// carry has room for it, so this never allocates.
		held := len(w.carry)
		take := min(len(p), m)
		tmp := append(w.carry, p[:take]...)
		stop := min(held, len(tmp)-m+1)
		if stop < held {
			// p was too short to decide every held-back position.
			i := r.scan(tmp, max(stop, 0), w.emit, &matched)
			w.carry = append(w.carry[:0], tmp[i:]...)
			return
		}
		i := r.scan(tmp, held, w.emit, &matched)
		w.carry = w.carry[:0]
		p = p[i-held:]
	}
	if stop := len(p) - m + 1; stop > 0 {
		p = p[r.scan(p, stop, w.emit, &matched):]
	}
	w.carry = append(w.carry[:0], p...)
}

// Cut ends a stream that stopped early (a cancel, a timeout, a drain cap):
// held-back bytes that could begin a secret are replaced, never emitted,
// since the rest of the secret may be what was cut off.
func (w *Stream) Cut() {
	w.Close() // TODO(redact): replace a held-back partial secret
}

// Close decides the held-back bytes as the end of the stream.
func (w *Stream) Close() {
	if len(w.carry) == 0 {
		return
	}
	var matched bool
	w.r.scan(w.carry, len(w.carry), w.emit, &matched)
	w.carry = w.carry[:0]
}
