package redact

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
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

// Redactor replaces every form (see Forms) of registered secret values
// with "[REDACTED:<name>]". It is safe for concurrent use; streaming state
// lives in the writers it makes.
//
// Matching is leftmost-longest in the view of the input without the line
// breaks between base64 characters (see join.go): scanning left to right,
// at each position the longest pattern that starts there is replaced,
// together with the breaks inside it, and the scan resumes after it. Only
// whole patterns are replaced: what the output shows never depends on
// whether its bytes begin a secret. The streaming writer produces exactly
// the same output as Redact on the whole input, however the input is
// split into writes.
type Redactor struct {
	// maxLen is the longest pattern, maxHold the longest hold (see form).
	maxLen, maxHold int
	// names are the secrets' names, sorted; see pattern.secret.
	names []string
	// filter has one bit per hash of a pattern's first 4 bytes; a clear bit
	// rules a position out with one load.
	filter [filterBits / 64]uint64
	// grams is a Bloom filter of each pattern's grams (gramMask bytes
	// long) at offsets 0 to stride-1; see scan and gramBloom. Its length
	// is a power of two.
	grams    []uint64
	gramMask uint32
	stride   int
	// gramOffsets maps each gram in the table to the offsets (bit d for
	// offset d) it has in some pattern, so a hit names the few start
	// positions worth checking.
	gramOffsets map[uint32]uint32
	// trie finds the longest pattern at a position; see trieNode.
	trie map[uint32]*trieNode
	// heads maps the first 1 to 3 bytes of every pattern (see headKey) to
	// what the patterns that start with them hold back: what a stream's
	// last bytes could begin. A pattern with a public prefix (see form)
	// is in it as a longHead.
	heads headTable
	// leads has one bit per pattern's first 2 bytes: a clear bit rules
	// out a head with one load (see heldBy).
	leads [1 << 16 / 64]uint64
	// pairs has, for each pair of bytes (little-endian), the longest
	// hold, up to maxPairLongest, of the heads of 3 bytes that have the
	// pair as their first 2 bytes or their last 2 (0: none): held tests
	// the positions near a write's end by the pairs at every other one.
	pairs [1 << 16]uint8
	// farPairs has, for each of farHolds, a bit for each pair of bytes
	// that is the first 2 bytes or the last 2 of a head of 3 bytes whose
	// hold is over that: held tests the positions farther than it from a
	// write's end by them.
	farPairs [len(farHolds)][1 << 16 / 64]uint64
}

type pattern struct {
	value       []byte
	replacement []byte
	// order is the pattern's rank in New; of two patterns as long, the
	// lower rank is the one a prefix of both is reported as.
	order int
	// secret is the index of its secret's name in Redactor.names.
	secret int
	// hold is how many bytes from its start a stream holds, and head how
	// many of its first bytes decide that it does (see form).
	hold, head int
}

// shorter reports whether p is preferred to q as the pattern a prefix
// begins: the shorter, or the first of two as long. A nil q loses.
func (p *pattern) shorter(q *pattern) bool {
	return q == nil || len(p.value) < len(q.value) || len(p.value) == len(q.value) && p.order < q.order
}

const (
	filterLog  = 16
	filterBits = 1 << filterLog
	// maxStride bounds the grams per pattern in the table, and so its
	// size; gramOffsets keeps offsets below maxStride in a uint32.
	maxStride = 32
	// The grams table has at least 2^minGramWordsLog words, 32 KiB, which
	// stays in L1, and more when the grams would set more than a quarter
	// of its bits, up to 2^maxGramWordsLog (512 KiB); see gramBloom.
	minGramWordsLog = 12
	maxGramWordsLog = 16
	// trieDepth bounds the trie: patterns that share their first trieDepth
	// bytes sit in one node and are told apart by comparison. Few do (the
	// forms of one multi-line secret), and the bound keeps a long pattern
	// (a private key, its hex) from costing a node per 4 bytes.
	trieDepth = 32
	// maxPairLongest is the most Redactor.pairs tells of a longest
	// hold: it stands for that or more.
	maxPairLongest = 255
	// nearHold is how near a write's end held tests positions by
	// Redactor.pairs; beyond it, only heads of a longer hold can hold, and
	// Redactor.farPairs, each of which fits the first-level cache, tells
	// them.
	nearHold = maxPairLongest - 1
)

// farHolds are the distances from a write's end past which held tests
// positions by Redactor.farPairs: heads of a long hold are few (the armour
// and body of a key, its hex and base64), and most of the positions near
// the end that begin one of a shorter hold are too far to be held.
var farHolds = [...]int{nearHold, 1 << 10, 1 << 12, 1 << 14}

func prefixHash(v uint32) uint32 { return (v * 0x9E3779B1) >> (32 - filterLog) }

// head is what the patterns that start with the same 1 to 3 bytes hold
// back in a stream (see at).
type head struct {
	// shortest is the shortest of those whose head is their first 3
	// bytes (see form), or nil: its marker replaces held bytes at a cut.
	shortest *pattern
	// hold is the longest hold of them (see form): bytes that begin
	// with the head are held until that many have arrived.
	hold int
	// long are the heads of those with a longer head, a public prefix
	// and 3 bytes more: few, the forms of a key's armour and body.
	long []*longHead
}

// longHead is what the patterns of one head longer than 3 bytes hold
// back: bytes that agree with head, as far as they go.
type longHead struct {
	head     []byte
	shortest *pattern
	hold     int
}

// headTable holds heads by headKey, by open addressing in a table at
// most half full: a lookup is a multiply and mostly one probe, where a
// map hashes its key first. held asks it at many positions near the end
// of every write.
type headTable struct {
	// slots has a power of two entries; a key of 0 is an empty slot (a
	// headKey is never 0: its top byte counts the bytes).
	slots []headSlot
	shift uint
}

type headSlot struct {
	key uint32
	h   *head
}

func newHeadTable(heads map[uint32]*head) headTable {
	log := uint(1)
	for 1<<log < 2*len(heads) {
		log++
	}
	t := headTable{slots: make([]headSlot, 1<<log), shift: 32 - log}
	for k, h := range heads {
		i := t.slot(k)
		for t.slots[i].key != 0 {
			i = (i + 1) & uint32(len(t.slots)-1)
		}
		t.slots[i] = headSlot{k, h}
	}
	return t
}

func (t *headTable) slot(key uint32) uint32 { return key * 0x9E3779B1 >> t.shift }

// get returns the head of key, or nil.
func (t *headTable) get(key uint32) *head {
	for i := t.slot(key); ; i = (i + 1) & uint32(len(t.slots)-1) {
		switch t.slots[i].key {
		case key:
			return t.slots[i].h
		case 0:
			return nil
		}
	}
}

// headKey is the key of heads for b, 1 to 3 bytes: the bytes, and their
// count in the top byte.
func headKey(b []byte) uint32 {
	var v [4]byte
	copy(v[:3], b)
	v[3] = byte(len(b))
	return binary.LittleEndian.Uint32(v[:])
}

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
	// A form shared by two names is redacted with the first name.
	secrets = slices.Clone(secrets)
	slices.SortStableFunc(secrets, func(a, b Secret) int { return strings.Compare(a.Name, b.Name) })
	r := &Redactor{trie: make(map[uint32]*trieNode)}
	heads := make(map[uint32]*head)
	longs := make(map[string]*longHead)
	var patterns []*pattern
	seen := make(map[string]*pattern)
	minLen := math.MaxInt
	for _, sec := range secrets {
		if len(sec.Value) < MinSecretLen {
			return nil, &ShortSecretError{Name: sec.Name}
		}
		if len(r.names) == 0 || r.names[len(r.names)-1] != sec.Name {
			r.names = append(r.names, sec.Name)
		}
		repl := []byte("[REDACTED:" + sec.Name + "]")
		for _, f := range forms(sec.Value) {
			if p := seen[f.text]; p != nil {
				r.addHeads(p, f.heads, heads, longs)
				continue
			}
			p := &pattern{value: []byte(f.text), replacement: repl, order: len(patterns), secret: len(r.names) - 1, hold: f.hold, head: f.head}
			seen[f.text] = p
			patterns = append(patterns, p)
			r.insert(p, heads, longs)
			r.addHeads(p, f.heads, heads, longs)
			h := prefixHash(binary.LittleEndian.Uint32(p.value))
			r.filter[h/64] |= 1 << (h % 64)
			r.maxLen = max(r.maxLen, len(p.value))
			r.maxHold = max(r.maxHold, p.hold)
			minLen = min(minLen, len(p.value))
		}
	}
	r.setHeads(heads)
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
			r.gramOffsets[binary.LittleEndian.Uint32(g[:])] |= 1 << off
		}
	}
	// 3 bits a gram in 12 bits of table: a quarter of them set.
	log := minGramWordsLog
	for log < maxGramWordsLog && 64<<log < 12*len(r.gramOffsets) {
		log++
	}
	r.grams = make([]uint64, 1<<log)
	for v := range r.gramOffsets {
		word, bits := gramBloom(v)
		r.grams[word&uint64(len(r.grams)-1)] |= bits
	}
	return r, nil
}

// trieNode is a step of 4 bytes in a trie of patterns: the node reached by a
// pattern's bytes [0, d) holds the patterns of length d to d+3 with those
// bytes (at trieDepth, every longer one too), longest first, and leads on
// by bytes [d, d+4). Secrets that share a prefix ("ghp_", "AKIA") cost one
// map step per 4 bytes, not one comparison per secret.
type trieNode struct {
	ends []*pattern
	next map[uint32]*trieNode
}

// insert puts p in r's trie, and its head (see addHead).
func (r *Redactor) insert(p *pattern, heads map[uint32]*head, longs map[string]*longHead) {
	r.addHead(p, p.value[:p.head], heads, longs)
	key := binary.LittleEndian.Uint32(p.value)
	n := r.trie[key]
	if n == nil {
		n = &trieNode{}
		r.trie[key] = n
	}
	for d := 4; d < trieDepth && len(p.value) >= d+4; d += 4 {
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
	slices.SortStableFunc(n.ends, func(a, b *pattern) int { return len(b.value) - len(a.value) })
}

// addHeads adds the heads of p's siblings (see form), each cut to p's
// head's length, as heads of p.
func (r *Redactor) addHeads(p *pattern, hs []string, heads map[uint32]*head, longs map[string]*longHead) {
	for _, h := range hs {
		r.addHead(p, []byte(h[:min(len(h), p.head)]), heads, longs)
	}
}

// addHead puts hd, a head of p, in r's leads and in heads by its first 1
// to 3 bytes: there, a head longer than 3 bytes (see form) is a longHead,
// one for all the patterns of that head (kept in longs by its bytes), in
// the long of those heads.
func (r *Redactor) addHead(p *pattern, hd []byte, heads map[uint32]*head, longs map[string]*longHead) {
	v := uint16(hd[0])<<8 | uint16(hd[1])
	r.leads[v/64] |= 1 << (v % 64)
	var l *longHead
	added := false
	if len(hd) > headLen {
		l = longs[string(hd)]
		if l == nil {
			l, added = &longHead{head: hd}, true
			longs[string(l.head)] = l
		}
		if p.shorter(l.shortest) {
			l.shortest = p
		}
		l.hold = max(l.hold, p.hold)
	}
	for n := 1; n <= min(headLen, len(hd)); n++ {
		k := headKey(hd[:n])
		h := heads[k]
		if h == nil {
			h = &head{}
			heads[k] = h
		}
		switch {
		case l == nil:
			if p.shorter(h.shortest) {
				h.shortest = p
			}
			h.hold = max(h.hold, p.hold)
		case added:
			h.long = append(h.long, l)
		}
	}
}

// setHeads puts heads in r.heads, and the pairs of those of 3 bytes in
// r.pairs and r.farPairs, by the longest hold of their patterns, long
// heads too: those tables rule positions out, and heldBy decides the
// rest.
func (r *Redactor) setHeads(heads map[uint32]*head) {
	r.heads = newHeadTable(heads)
	for k, h := range heads {
		if k>>24 != 3 {
			continue
		}
		hold := h.hold
		for _, l := range h.long {
			hold = max(hold, l.hold)
		}
		for _, v := range []uint32{k & 0xFFFF, k >> 8 & 0xFFFF} {
			r.pairs[v] = max(r.pairs[v], uint8(min(hold, maxPairLongest)))
			for i, d := range farHolds {
				if hold > d {
					r.farPairs[i][v/64] |= 1 << (v % 64)
				}
			}
		}
	}
}

// MaxHoldback is how many bytes a streaming redaction may hold back while it
// waits to decide whether they start a secret: fewer characters of the
// view (see join.go) than the longest hold (see form), each of which may
// come with a line break of 2 bytes left out before it, and up to 2 bytes
// of line break at either end.
func (r *Redactor) MaxHoldback() int {
	if r == nil || r.maxLen == 0 {
		return 0
	}
	return 3*r.maxHold + 1
}

// Redact returns b with every secret form replaced. It returns b itself when
// nothing matched.
func (r *Redactor) Redact(b []byte) []byte {
	if r == nil || r.maxLen == 0 {
		return b
	}
	v := views.Get().(*view)
	defer putView(v)
	v.build(0, true, b, true)
	c := cursor{v: v}
	var out []byte
	xc := 0
	r.scan(v.y, true, func(s, e int, p *pattern) {
		out = append(out, b[xc:c.x(s)]...)
		out = append(out, p.replacement...)
		xc = c.x(e-1) + 1
	})
	if out == nil {
		return b
	}
	return append(out, b[xc:]...)
}

// RedactString is Redact for strings: audit lines, error messages, headers.
func (r *Redactor) RedactString(s string) string {
	if r == nil || r.maxLen == 0 {
		return s
	}
	out := r.Redact([]byte(s))
	return string(out)
}

// undecided is what at returns for a position more input could still make
// the start of a pattern.
const undecided = -1

// scan decides the positions of buf, a view (see join.go), from the
// first, calls match for each pattern it replaces (buf[s:e]), and returns
// the first position it could not decide. At the end of the input (end
// set) it decides every position and returns len(buf); otherwise it stops
// at the first position held back (see at), and every position before
// was decided as the whole input would decide it.
func (r *Redactor) scan(buf []byte, end bool, match func(s, e int, p *pattern)) (next int) {
	i := 0
	// The hot loop decides a block of stride start positions with one
	// table lookup. Every pattern is at least stride+gram-1 bytes long, so
	// a pattern starting in the block contains the gram at the block's last
	// position, at an offset below stride; the table holds every pattern's
	// grams at those offsets. A miss rules out the whole block, also as
	// the start of a pattern the input ends inside, once the gram is in
	// buf.
	g, mask, k := r.grams, r.gramMask, r.stride
	// A word's index is gramBloom's masked with len(g)-1; after this
	// check, the masked index needs none.
	gm := uint64(len(g) - 1)
	_ = g[gm]
	// Before the end, the blocks and the positions after them stop at the
	// first position held back by its first bytes (see at), and go on
	// after it if a match takes it in. The rest of the positions before
	// it are decided like those of a whole input.
	limit := len(buf)
	if !end {
		limit = r.held(buf, 0)
	}
	for {
	blocks:
		for i+k+3 <= len(buf) && i+k <= limit {
			// Two blocks per test while they fit: fewer branches.
			n := k
			if i+2*k+3 <= len(buf) && i+2*k <= limit {
				wa, ma := gramBloom(binary.LittleEndian.Uint32(buf[i+k-1:]) & mask)
				wb, mb := gramBloom(binary.LittleEndian.Uint32(buf[i+2*k-1:]) & mask)
				if g[wa&gm]&ma != ma && g[wb&gm]&mb != mb {
					i += 2 * k
					continue
				}
				n = 2 * k
			} else if w, m := gramBloom(binary.LittleEndian.Uint32(buf[i+k-1:]) & mask); g[w&gm]&m != m {
				i += k
				continue
			}
			// Only the starts the gram map names can begin a pattern; take
			// them in order: blocks in turn, and in a block the highest
			// offset first.
			for w := i + k - 1; w < i+n; w += k {
				offs := r.gramOffsets[binary.LittleEndian.Uint32(buf[w:])&mask]
				for offs != 0 {
					d := 31 - bits.LeadingZeros32(offs)
					offs &^= 1 << d
					s := w - d
					p, m := r.at(buf, s, end)
					if m == 0 {
						continue
					}
					match(s, s+m, p)
					i = s + m
					if i > limit {
						limit = r.held(buf, i)
					}
					continue blocks
				}
			}
			i += n
		}
		for i < limit {
			// Most positions the blocks left begin no pattern's first 2
			// bytes.
			if i+1 < len(buf) && !r.leads2(buf[i], buf[i+1]) {
				i++
				continue
			}
			p, m := r.at(buf, i, end)
			if m == 0 {
				i++
				continue
			}
			match(i, i+m, p)
			i += m
		}
		if i == limit {
			break
		}
		// A match took the limit in.
		limit = r.held(buf, i)
	}
	return i
}

// held returns the first position of buf from on that a stream holds
// back (at returns undecided for it), or len(buf) when there is none.
// The positions of 3 bytes or more are tested by the pairs at every other
// position, four with one load, since each position's head has its first
// 2 bytes or its last 2 at one of them: a pair whose heads' longest
// hold (see Redactor.pairs) is no longer than the bytes from a position
// to the end holds none. The pairs are taken in order, and at
// each the position before first, so the first position held is the
// first found. Positions farther than nearHold from the end are tested
// by Redactor.farPairs first: only heads of a longer hold can hold them.
func (r *Redactor) held(buf []byte, from int) int {
	holds := func(s int) bool {
		hold, _ := r.heldBy(buf[s:])
		return len(buf)-s < hold
	}
	// No position as far as maxHold from the end is held.
	from = max(from, len(buf)-r.maxHold+1)
	j := from
	for near := len(buf) - nearHold; j+8 <= near; j += 8 {
		// The far pairs of the longest hold the position nearest the end
		// passes.
		far := &r.farPairs[0]
		for i := len(farHolds) - 1; i > 0; i-- {
			if len(buf)-j-7 > farHolds[i] {
				far = &r.farPairs[i]
				break
			}
		}
		x := binary.LittleEndian.Uint64(buf[j:])
		if (far[x>>6&0x3FF]>>(x&63)|far[x>>22&0x3FF]>>(x>>16&63)|far[x>>38&0x3FF]>>(x>>32&63)|far[x>>54]>>(x>>48&63))&1 == 0 {
			continue
		}
		// The pair at q is the last of position q-1's head and the first
		// of q's.
		for q := j; q < j+8; q += 2 {
			if q > from && holds(q-1) {
				return q - 1
			}
			if holds(q) {
				return q
			}
		}
	}
	return r.heldNear(buf, from, j)
}

// heldNear is held for the positions from on, testing by the pairs from j
// on (at j, the position before it too), near the end.
func (r *Redactor) heldNear(buf []byte, from, j int) int {
	holds := func(s int) bool {
		hold, _ := r.heldBy(buf[s:])
		return len(buf)-s < hold
	}
	// passes reports whether longest, from pairs, is more than n bytes.
	passes := func(longest uint8, n int) bool { return int(longest) > min(n, maxPairLongest-1) }
	last := len(buf) - 3
	// heldAt returns the position the pair at j holds, or -1.
	heldAt := func(j int) int {
		longest := r.pairs[binary.LittleEndian.Uint16(buf[j:])]
		if j > from && passes(longest, len(buf)-j+1) && holds(j-1) {
			return j - 1
		}
		if j <= last && passes(longest, len(buf)-j) && holds(j) {
			return j
		}
		return -1
	}
	for ; j+8 <= len(buf) && j+6 <= last+1; j += 8 {
		x := binary.LittleEndian.Uint64(buf[j:])
		// The or is at least the largest; j+6 is the position closest to
		// the end.
		if !passes(r.pairs[uint16(x)]|r.pairs[uint16(x>>16)]|r.pairs[uint16(x>>32)]|r.pairs[x>>48], len(buf)-j-6) {
			continue
		}
		for q := j; q < j+8; q += 2 {
			if s := heldAt(q); s >= 0 {
				return s
			}
		}
	}
	for ; j <= last+1; j += 2 {
		if s := heldAt(j); s >= 0 {
			return s
		}
	}
	// The last 2 positions, whose heads are shorter.
	for s := max(from, last+1); s < len(buf); s++ {
		if holds(s) {
			return s
		}
	}
	return len(buf)
}

// at decides position s of buf. It returns the pattern whose marker
// replaces buf[s:s+n]; or nil and 0 for a byte kept as it is; or nil and
// undecided when end is not set, the bytes from s, as far as they go,
// agree with the head of a pattern (its first 3 bytes, or its public
// prefix and 3 bytes more: see form), and fewer bytes follow s than the
// longest hold of the patterns whose head they agree with.
//
// Which bytes are held is decided by their first bytes as far as heads
// go alone, never by how far they go on to match a pattern past its
// head: a stream's held bytes are
// invisible while it runs and replaced when it is cut (see Stream.Cut), so
// an agent that has its own bytes echoed back would otherwise learn, by
// appending one guessed character at a time, whether they still begin a
// secret, and so the whole secret.
func (r *Redactor) at(buf []byte, s int, end bool) (p *pattern, n int) {
	b := buf[s:]
	if !end && len(b) < r.maxHold {
		hold, shortest := r.heldBy(b)
		if shortest == nil {
			return nil, 0
		}
		if len(b) < hold {
			// Even when b begins with a whole pattern: whether a longer one
			// goes on from it would tell how far b matches that one, and an
			// agent can know a whole pattern without the secret (a form of
			// "user:password" that holds only the user).
			return nil, undecided
		}
	}
	if len(b) < 4 {
		return nil, 0
	}
	// At the end, or as long as any pattern that could start here: the
	// longest whole pattern decides.
	if p := r.matchAt(b); p != nil {
		return p, len(p.value)
	}
	return nil, 0
}

// heldBy returns what holds b back while a stream runs: the longest
// hold of the patterns whose head b agrees with as far as it goes (see
// form), and the shortest of them, whose marker replaces b when the
// stream is cut; or 0 and nil when there are none.
func (r *Redactor) heldBy(b []byte) (hold int, shortest *pattern) {
	h := r.heads.get(headKey(b[:min(len(b), headLen)]))
	if h == nil {
		return 0, nil
	}
	hold, shortest = h.hold, h.shortest
	for _, l := range h.long {
		if n := min(len(b), len(l.head)); bytes.Equal(b[:n], l.head[:n]) {
			hold = max(hold, l.hold)
			if l.shortest.shorter(shortest) {
				shortest = l.shortest
			}
		}
	}
	return hold, shortest
}

// leads2 reports whether some pattern begins with the bytes b0, b1: scan
// asks it before at, to rule out most positions near the end of a write
// without a map lookup.
func (r *Redactor) leads2(b0, b1 byte) bool {
	v := uint16(b0)<<8 | uint16(b1)
	return r.leads[v/64]&(1<<(v%64)) != 0
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
	var full *pattern
	n := r.trie[key]
	for d := 4; n != nil; d += 4 {
		for _, p := range n.ends {
			if len(p.value) <= len(b) && bytes.HasPrefix(b, p.value) {
				full = p
				break
			}
		}
		if len(b) < d+4 {
			break
		}
		n = n.next[binary.LittleEndian.Uint32(b[d:])]
	}
	return full
}

// gramBloom gives the word of the grams table for a gram (to be masked
// with the table's length minus one) and the three bits it sets there: a
// blocked Bloom filter, whose test is one load and one branch. Three bits
// rather than two keep false positives rare, which matters because
// ordinary output repeats its grams: one frequent gram that passes falsely
// costs a map lookup on every line. The bits come from the top of a
// multiplicative hash, where every bit of the gram counts, the word from
// the 16 bits below; all by constant shifts, which cost less on amd64
// than a shift by a variable.
func gramBloom(v uint32) (word uint64, bits uint64) {
	h := uint64(v) * 0x9E3779B97F4A7C15
	return h >> (46 - maxGramWordsLog), 1<<(h>>58) | 1<<(h>>52&63) | 1<<(h>>46&63)
}
