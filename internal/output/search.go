package output

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"regexp/syntax"
	"unicode/utf8"
)

const (
	// maxPatternInsts bounds the compiled program of a search pattern. The
	// matcher may step every instruction at every byte, so the program's
	// size is the cost of each byte searched: [ab]{300}c, 303
	// instructions, takes about 6 s per MiB of a's and b's here.
	maxPatternInsts = 1000
	// searchBufBytes is the one buffer a search reads through.
	searchBufBytes = 64 << 10
	// searchWork is the matcher work, in instructions times bytes, between
	// two looks at the deadline: about 10 ms at the slowest (20 ns for an
	// instruction and a byte).
	searchWork = 1 << 19
	// lineTextBytes bounds the text of a matching line, and
	// contextTextBytes that of a line around it. A matching line that is
	// longer is shown from its start when the match is near it, and from
	// snippetBefore bytes before the match otherwise.
	lineTextBytes    = 512
	contextTextBytes = 200
	snippetBefore    = 60
	snippetAfter     = 100
	// MaxContextLines bounds the lines shown before and after a match.
	MaxContextLines = 10
)

// clipMark replaces what a clipped line leaves out.
const clipMark = "…"

// SearchResult is the search_output result.
//
// Every retained byte is searched, line by line, and no match is missed
// or made up at a buffer boundary. A line longer than what one look at the
// deadline allows is matched in overlapping windows when the pattern's
// matches are short and depend on nothing around them (no ^, $, \b), and
// as a stream otherwise. A line that a gap in what was retained cuts in two
// is searched as two lines, each of the part retained.
type SearchResult struct {
	Handle  string        `json:"handle"`
	Stream  string        `json:"stream"`
	Matches []SearchMatch `json:"matches"`
	// Truncated reports that the search stopped before the end of the
	// retained data; Reason says why: "max_matches", "time_limit",
	// "cancelled", or "result_bytes" when FitSearch dropped matches.
	Truncated bool   `json:"truncated"`
	Reason    string `json:"reason,omitempty"`
	// Missing names byte ranges that were not retained, so not searched.
	Missing []ByteRange `json:"missing,omitempty"`
	// Interrupted reports that the process that ran the action ended
	// before it finished: only the start of the stream was recovered.
	// Running reports that the action was still running: only what had
	// arrived was searched.
	Running     bool `json:"running,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
}

// SearchMatch is one matching line.
type SearchMatch struct {
	// Offset is the stream offset where the match starts.
	Offset int64 `json:"offset"`
	// Line is the 1-based line number of the match in the whole stream.
	Line int64 `json:"line"`
	// LineOffset is the stream offset where the line starts (where its
	// retained part starts, for a line that a gap cuts).
	LineOffset int64 `json:"line_offset"`
	// Text is the line without its newline, clipped to lineTextBytes: a
	// clipped end, or a start clipped to keep the match in view, is marked
	// with "…".
	Text string `json:"text"`
	// Before and After are the lines around the match, as many as asked
	// and retained with it, each clipped to contextTextBytes (marked "…").
	// They are nil when no context was asked.
	Before []string `json:"before,omitempty"`
	After  []string `json:"after,omitempty"`
}

// PatternError is a search pattern that is not a valid RE2 expression, or
// is too long or too complex to search with.
type PatternError struct {
	Err error
}

func (e *PatternError) Error() string { return "invalid search pattern: " + e.Err.Error() }
func (e *PatternError) Unwrap() error { return e.Err }

// Search runs the RE2 pattern over each retained line of a finished
// action's stream, reporting at most maxMatches matching lines (<= 0 means
// DefaultMaxMatches; capped at MaxMatches), at most one per line, each with
// up to contextLines lines before and after it (capped at MaxContextLines;
// lines a gap separates do not count). It waits
// for a turn (see SpoolOptions.MaxConcurrentReads), returning ctx's cause,
// wrapped, if ctx ends first; then it scans for at most SearchTimeLimit,
// and a search stopped by that or by ctx returns what it found, truncated,
// with the reason. It holds one buffer of searchBufBytes whatever the
// stream and its lines. Errors are *HandleError or *PatternError.
func (s *Spool) Search(ctx context.Context, handle, stream, pattern string, maxMatches, contextLines int) (*SearchResult, error) {
	rd, err := s.open(ctx, handle, stream)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	// Compiled in the turn: compiling takes up to about a MiB.
	p, err := compilePattern(pattern)
	if err != nil {
		return nil, err
	}
	if maxMatches <= 0 {
		maxMatches = DefaultMaxMatches
	}
	ctx, cancel := context.WithTimeoutCause(ctx, s.searchLimit, errSearchTime)
	defer cancel()

	return search(ctx, rd, p, min(maxMatches, MaxMatches), min(max(contextLines, 0), MaxContextLines), searchBufBytes)
}

// search scans the retained ranges of rd through a buffer of bufBytes.
func search(ctx context.Context, rd *streamReader, p *searchPattern, maxMatches, contextLines, bufBytes int) (*SearchResult, error) {
	res := &SearchResult{Handle: rd.handle, Stream: rd.meta.Name, Matches: []SearchMatch{}, Running: rd.running, Interrupted: rd.interrupted}
	retained, _ := rd.meta.retained()
	res.Missing = gaps(retained, rd.meta.Total)
	if len(retained) == 0 {
		return res, nil
	}
	sc := &searcher{ctx: ctx, rd: rd, pattern: p, res: res, maxMatches: maxMatches, contextLines: contextLines, buf: make([]byte, bufBytes)}
	sc.lineBytes = min(p.lineBytes, bufBytes)
	if len(p.prefix) < bufBytes/2 {
		sc.prefix = p.prefix // skipTo keeps len(prefix)-1 bytes in the buffer
	}
	// Windows overlap by the longest match and a character, so that every
	// match starting before the overlap ends inside the window, decoded as
	// in the whole line. When the overlap would be most of the window, a
	// long line is matched as a stream.
	if overlap := p.maxLen + utf8.UTFMax; p.maxLen >= 0 && overlap <= sc.lineBytes && 2*overlap <= bufBytes {
		sc.overlap = overlap
		sc.window = min(bufBytes, sc.lineBytes+overlap)
	}
	for _, r := range retained {
		// The line number at r.Start is one more than the newlines before
		// it; a range that does not start the stream runs to its end.
		line := int64(1)
		if r.Start > 0 {
			n, err := sc.newlines(r)
			if err != nil {
				return nil, err
			}
			line += rd.meta.Newlines - n
		}
		if sc.stop == "" {
			// Lines around a match do not reach across a gap.
			sc.before, sc.pending = sc.before[:0], sc.pending[:0]
			if err := sc.scan(r, line); err != nil {
				return nil, err
			}
		}
		if sc.stop == "" && sc.full {
			sc.stop = "max_matches"
		}
		if sc.stop != "" {
			res.Truncated, res.Reason = true, sc.stop
			break
		}
	}
	return res, nil
}

var errSearchTime = errors.New("search time limit")

// searchPattern is a compiled search pattern and what its size allows.
type searchPattern struct {
	re *regexp.Regexp
	// prefix is a literal every match begins with, or "".
	prefix string
	// lineBytes is how many bytes the matcher goes through between two
	// looks at the deadline. A longer line is matched in windows or as a
	// stream.
	lineBytes int
	// maxLen is the most bytes a match takes, or -1 when that is unbounded
	// or a match depends on what is around it.
	maxLen int
}

// compilePattern compiles a search pattern, refusing one whose program
// is too large to search with (see maxPatternInsts).
func compilePattern(pattern string) (*searchPattern, error) {
	if len(pattern) > MaxPatternBytes {
		return nil, &PatternError{Err: fmt.Errorf("longer than %d bytes", MaxPatternBytes)}
	}
	// Parsed as regexp.Compile parses it, to size the program it runs.
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, &PatternError{Err: err}
	}
	tooComplex := func(n string) error {
		return &PatternError{Err: fmt.Errorf("too complex: it compiles to %s instructions, and the limit is %d; use fewer or smaller repetitions ({n}) and alternatives", n, maxPatternInsts)}
	}
	// Repetitions expand: a pattern of a few KiB could compile to half a
	// million instructions, 20 MiB. Bound the program before compiling it.
	if n := instBound(tree); n > 16*maxPatternInsts {
		return nil, tooComplex("more than " + fmt.Sprint(16*maxPatternInsts))
	}
	prog, err := syntax.Compile(tree.Simplify())
	if err != nil {
		return nil, &PatternError{Err: err}
	}
	if len(prog.Inst) > maxPatternInsts {
		return nil, tooComplex(fmt.Sprint(len(prog.Inst)))
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, &PatternError{Err: err}
	}
	// Prog.Prefix, unlike Regexp.LiteralPrefix, is empty when the program
	// begins with an assertion (^, \b): a match may then not start at the
	// first occurrence of the literal that follows.
	prefix, _ := prog.Prefix()
	return &searchPattern{re: re, prefix: prefix, lineBytes: min(searchBufBytes, searchWork/len(prog.Inst)), maxLen: windowBound(tree)}, nil
}

// windowBound is the most bytes a match of re takes, or -1 when that is
// unbounded or a match depends on what is around it (an assertion of a
// line's, the text's or a word's edge): then a window of a line may find a
// match the line does not have, or miss one it has.
func windowBound(re *syntax.Regexp) int {
	n := 0
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpNoMatch:
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				n += utf8.UTFMax // k and the Kelvin sign fold together
			} else {
				n += max(1, utf8.RuneLen(r))
			}
		}
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		n = utf8.UTFMax
	case syntax.OpCapture, syntax.OpQuest, syntax.OpRepeat, syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			m := windowBound(sub)
			switch {
			case m < 0:
				return -1
			case re.Op == syntax.OpConcat:
				n += m
			default:
				n = max(n, m)
			}
		}
		if re.Op == syntax.OpRepeat {
			if re.Max < 0 {
				return -1
			}
			n *= re.Max
		}
	default: // star, plus, and the assertions
		return -1
	}
	return n
}

// instBound is an upper bound of the instructions re compiles to, capped
// far above any limit so that it cannot overflow.
func instBound(re *syntax.Regexp) int64 {
	const ceiling = 1 << 40
	var n int64
	switch re.Op {
	case syntax.OpLiteral:
		n = int64(len(re.Rune))
	case syntax.OpConcat, syntax.OpAlternate:
		for _, sub := range re.Sub {
			n += instBound(sub) + 1
		}
	case syntax.OpCapture, syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		n = instBound(re.Sub[0]) + 2
	case syntax.OpRepeat:
		k := int64(re.Max)
		if k < 0 {
			k = int64(re.Min) + 1
		}
		n = k * min(instBound(re.Sub[0])+2, ceiling/max(k, 1))
	default:
		n = 1
	}
	return min(n+2, ceiling)
}

// searcher scans the retained ranges of one stream through one buffer:
// buf[lo:hi] holds the stream bytes from at on, in a range that ends at
// end.
type searcher struct {
	ctx        context.Context
	rd         *streamReader
	pattern    *searchPattern
	res        *SearchResult
	maxMatches int
	// contextLines is how many lines to show around a match. before holds
	// the last lines scanned, up to contextLines; pending indexes the
	// matches still taking lines after them; found says the line being
	// scanned matched; full says a match past maxMatches was found, so the
	// search stops once pending is empty.
	contextLines int
	before       []ByteRange
	pending      []int
	matched      bool
	full         bool
	// lineBytes and prefix are the pattern's, for this buffer's size.
	lineBytes int
	prefix    string
	// window is the size of the windows a long line is matched in, and
	// overlap how much each overlaps the next; window is 0 when long lines
	// are matched as a stream.
	window, overlap int

	buf     []byte
	lo, hi  int
	at, end int64
	// work counts bytes matched since the deadline was last looked at.
	work int
	// stop says why the search stopped: "" while it goes on.
	stop string
}

// stopped looks at the deadline and ctx, and records why the search stops.
func (sc *searcher) stopped() bool {
	if sc.ctx.Err() == nil {
		return false
	}
	sc.stop = "cancelled"
	if context.Cause(sc.ctx) == errSearchTime {
		sc.stop = "time_limit"
	}
	return true
}

// tick counts n bytes of work, and looks at the deadline once enough have
// been done since the last look.
func (sc *searcher) tick(n int) bool {
	sc.work += n
	if sc.work < sc.lineBytes {
		return false
	}
	sc.work = 0
	return sc.stopped()
}

// fill moves the unread bytes to the front of the buffer and reads more of
// the range after them.
func (sc *searcher) fill() error {
	n := copy(sc.buf, sc.buf[sc.lo:sc.hi])
	sc.lo, sc.hi = 0, n
	k := int(min(int64(len(sc.buf)-n), sc.end-sc.at-int64(n)))
	if err := sc.rd.readAt(sc.buf[n:n+k], sc.at+int64(n)); err != nil {
		return err
	}
	sc.hi += k
	return nil
}

func (sc *searcher) advance(n int) {
	sc.lo += n
	sc.at += int64(n)
}

// more reports whether the range has bytes past the buffer.
func (sc *searcher) more() bool { return sc.at+int64(sc.hi-sc.lo) < sc.end }

// newlines counts the newlines in r.
func (sc *searcher) newlines(r ByteRange) (int64, error) {
	var n int64
	for at := r.Start; at < r.End && !sc.tick(len(sc.buf)); {
		b := sc.buf[:min(int64(len(sc.buf)), r.End-at)]
		if err := sc.rd.readAt(b, at); err != nil {
			return 0, err
		}
		n += int64(bytes.Count(b, []byte{'\n'}))
		at += int64(len(b))
	}
	return n, nil
}

// scan searches the range r, whose first line is number line.
func (sc *searcher) scan(r ByteRange, line int64) error {
	sc.lo, sc.hi, sc.at, sc.end = 0, 0, r.Start, r.End
	if sc.stopped() {
		return nil
	}
	for {
		data := sc.buf[sc.lo:sc.hi]
		nl := bytes.IndexByte(data, '\n')
		if nl < 0 && sc.more() {
			if len(data) < sc.lineBytes {
				if err := sc.fill(); err != nil {
					return err
				}
				continue
			}
			start := sc.at
			if err := sc.longLine(line); err != nil || sc.stop != "" {
				return err
			}
			end := sc.at
			if sc.lo > 0 && sc.buf[sc.lo-1] == '\n' {
				end--
			}
			if err := sc.endLine(ByteRange{start, end}); err != nil || sc.stop != "" {
				return err
			}
			line++
			continue
		}
		if len(data) == 0 {
			return nil // the end of the range
		}
		n := nl
		if n < 0 {
			n = len(data) // the range ends inside this line
		}
		if sc.tick(n + 1) {
			return nil
		}
		if loc := sc.pattern.re.FindIndex(data[:n]); loc != nil {
			if err := sc.found(sc.at, sc.at+int64(loc[0]), line); err != nil || sc.stop != "" {
				return err
			}
		}
		start := sc.at
		sc.advance(min(n+1, len(data)))
		if err := sc.endLine(ByteRange{start, start + int64(n)}); err != nil || sc.stop != "" {
			return err
		}
		line++
	}
}

// longLine matches the line that starts at sc.at, longer than lineBytes,
// as a stream through the buffer, looking at the deadline as it goes, and
// moves past it.
func (sc *searcher) longLine(line int64) error {
	if sc.window > 0 {
		return sc.windows(line)
	}
	lineStart := sc.at
	if sc.prefix != "" {
		// No match begins before the first occurrence of the prefix.
		found, err := sc.skipTo(sc.prefix)
		if err != nil || sc.stop != "" {
			return err
		}
		if !found {
			return sc.skipLine()
		}
	}
	start := sc.at
	rr := lineReader{sc: sc}
	loc := sc.pattern.re.FindReaderIndex(&rr)
	if rr.err != nil {
		return rr.err
	}
	if sc.stop != "" {
		// The matcher saw an end of text that was not the line's end: its
		// answer does not count.
		return nil
	}
	if loc != nil {
		if err := sc.found(lineStart, start+int64(loc[0]), line); err != nil || sc.stop != "" {
			return err
		}
	}
	return sc.skipLine()
}

// windows matches the long line that starts at sc.at in windows that
// overlap by sc.overlap, and moves past it. A match is taken from a window
// only if it starts before the overlap, where the window holds every match
// that starts there, or if the line ends in the window.
func (sc *searcher) windows(line int64) error {
	lineStart := sc.at
	for {
		if sc.hi-sc.lo < sc.window && sc.more() {
			if err := sc.fill(); err != nil {
				return err
			}
		}
		w := sc.buf[sc.lo:min(sc.hi, sc.lo+sc.window)]
		last := sc.lo+len(w) == sc.hi && !sc.more()
		if nl := bytes.IndexByte(w, '\n'); nl >= 0 {
			w, last = w[:nl], true
		}
		if sc.tick(len(w)) {
			return nil
		}
		owned := len(w) - sc.overlap
		if loc := sc.pattern.re.FindIndex(w); loc != nil && (last || loc[0] < owned) {
			if err := sc.found(lineStart, sc.at+int64(loc[0]), line); err != nil || sc.stop != "" {
				return err
			}
			return sc.skipLine()
		}
		if last {
			return sc.skipLine()
		}
		sc.advance(runeBoundary(w, owned))
	}
}

// runeBoundary returns where the character that holds b[i] starts, when b
// is decoded from its start as the matcher decodes it: an invalid byte is a
// character of its own. b holds a whole character at i.
func runeBoundary(b []byte, i int) int {
	for j := i; j >= max(0, i-utf8.UTFMax+1); j-- {
		if utf8.RuneStart(b[j]) {
			if _, size := utf8.DecodeRune(b[j:]); j+size > i {
				return j
			}
			return i
		}
	}
	return i
}

// skipTo moves to the first occurrence of lit in the rest of the line, and
// reports whether there is one; if not, it moves to the line's end.
func (sc *searcher) skipTo(lit string) (bool, error) {
	for {
		data := sc.buf[sc.lo:sc.hi]
		rest := data
		nl := bytes.IndexByte(data, '\n')
		if nl >= 0 {
			rest = data[:nl]
		}
		if i := bytes.Index(rest, []byte(lit)); i >= 0 {
			sc.advance(i)
			return true, nil
		}
		if nl >= 0 || !sc.more() {
			sc.advance(len(rest))
			return false, nil
		}
		// Keep what could begin an occurrence cut by the buffer's end.
		n := max(0, len(data)-(len(lit)-1))
		sc.advance(n)
		if sc.tick(n) {
			return false, nil
		}
		if err := sc.fill(); err != nil {
			return false, err
		}
	}
}

// skipLine moves past the end of the line: its newline, or the range's end.
func (sc *searcher) skipLine() error {
	for {
		data := sc.buf[sc.lo:sc.hi]
		if nl := bytes.IndexByte(data, '\n'); nl >= 0 {
			sc.advance(nl + 1)
			return nil
		}
		sc.advance(len(data))
		if !sc.more() || sc.tick(len(data)) {
			return nil
		}
		if err := sc.fill(); err != nil {
			return err
		}
	}
}

// lineReader gives the matcher the rest of the line from the buffer, one
// character at a time, and ends early, with the search's stop reason set,
// when the deadline passes.
type lineReader struct {
	sc  *searcher
	err error // a read of the spool file failed
}

func (r *lineReader) ReadRune() (rune, int, error) {
	sc := r.sc
	if sc.hi-sc.lo < utf8.UTFMax && sc.more() {
		if err := sc.fill(); err != nil {
			r.err = err
			return 0, 0, io.EOF
		}
	}
	if sc.lo == sc.hi || sc.buf[sc.lo] == '\n' {
		return 0, 0, io.EOF
	}
	c, size := rune(sc.buf[sc.lo]), 1
	if c >= utf8.RuneSelf {
		c, size = utf8.DecodeRune(sc.buf[sc.lo:sc.hi])
	}
	if sc.tick(size) {
		return 0, 0, io.EOF
	}
	sc.advance(size)
	return c, size, nil
}

// found records a match at offset ms of the line that starts at
// lineStart, with the lines before it, or notes that there are more than
// maxMatches.
func (sc *searcher) found(lineStart, ms, line int64) error {
	if len(sc.res.Matches) == sc.maxMatches {
		sc.full = true
		if len(sc.pending) == 0 {
			sc.stop = "max_matches"
		}
		return nil
	}
	text, err := sc.matchText(lineStart, ms)
	if err != nil {
		return err
	}
	m := SearchMatch{Offset: ms, Line: line, LineOffset: lineStart, Text: text}
	for _, r := range sc.before {
		t, err := sc.contextText(r)
		if err != nil {
			return err
		}
		m.Before = append(m.Before, t)
	}
	sc.res.Matches = append(sc.res.Matches, m)
	sc.matched = true
	return nil
}

// endLine takes the line r just scanned: as a line after the matches
// that still take some, then as a line before the next ones.
func (sc *searcher) endLine(r ByteRange) error {
	if sc.contextLines == 0 {
		return nil
	}
	keep := sc.pending[:0]
	for _, i := range sc.pending {
		t, err := sc.contextText(r)
		if err != nil {
			return err
		}
		m := &sc.res.Matches[i]
		m.After = append(m.After, t)
		if len(m.After) < sc.contextLines {
			keep = append(keep, i)
		}
	}
	sc.pending = keep
	if sc.matched {
		sc.pending = append(sc.pending, len(sc.res.Matches)-1)
		sc.matched = false
	}
	if len(sc.before) == sc.contextLines {
		sc.before = append(sc.before[:0], sc.before[1:]...)
	}
	sc.before = append(sc.before, r)
	if sc.full && len(sc.pending) == 0 {
		sc.stop = "max_matches"
	}
	return nil
}

// matchText returns the matching line that starts at lineStart, clipped
// so that the match at ms stays in view.
func (sc *searcher) matchText(lineStart, ms int64) (string, error) {
	from, pre := lineStart, ""
	if ms-lineStart > lineTextBytes-snippetAfter {
		from, pre = ms-snippetBefore, clipMark
	}
	b := make([]byte, min(sc.end, from+lineTextBytes+1)-from)
	if err := sc.rd.readAt(b, from); err != nil {
		return "", err
	}
	suf := ""
	switch i := bytes.IndexByte(b, '\n'); {
	case i >= 0:
		b = b[:i]
	case len(b) > lineTextBytes:
		b, suf = trimToRuneEnd(b[:lineTextBytes]), clipMark
	case sc.end < sc.rd.meta.Total:
		suf = clipMark // the line goes on in bytes not kept
	}
	if pre != "" {
		b = trimToRuneStart(b)
	}
	return pre + string(bytes.ToValidUTF8(b, []byte("\uFFFD"))) + suf, nil
}

// contextText returns the line r, clipped to contextTextBytes.
func (sc *searcher) contextText(r ByteRange) (string, error) {
	b := make([]byte, min(r.End-r.Start, contextTextBytes))
	if err := sc.rd.readAt(b, r.Start); err != nil {
		return "", err
	}
	suf := ""
	if r.End-r.Start > contextTextBytes {
		b, suf = trimToRuneEnd(b), clipMark
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD"))) + suf, nil
}

// gaps returns the parts of [0, total) outside the sorted ranges rs.
func gaps(rs []ByteRange, total int64) []ByteRange {
	var out []ByteRange
	at := int64(0)
	for _, r := range rs {
		if r.Start > at {
			out = append(out, ByteRange{at, r.Start})
		}
		at = r.End
	}
	if at < total {
		out = append(out, ByteRange{at, total})
	}
	return out
}
