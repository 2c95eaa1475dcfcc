package output

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// EnvelopeIDBytes is what a result's size counts for the JSON-RPC id, which
// a client may make a long string.
const EnvelopeIDBytes = 256

// ResultTooLargeError is returned when a result exceeds the budget even
// with every preview emptied.
type ResultTooLargeError struct {
	Size, Budget int
}

func (e *ResultTooLargeError) Error() string {
	return fmt.Sprintf("tool result is %d bytes with every preview emptied; the limit (result_bytes) is %d", e.Size, e.Budget)
}

// ResultSize is the size in bytes of the JSON-RPC response that carries a
// tool result: structured as structuredContent, text as the one text block,
// with EnvelopeIDBytes for the id and the frame's newline. It measures with
// json.Marshal, whose HTML escaping makes it an upper bound for encoders
// that do not escape.
func ResultSize(structured any, text string) (int, error) {
	type textBlock struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	env := struct {
		JSONRPC string `json:"jsonrpc"`
		ID      int    `json:"id"`
		Result  struct {
			Content    []textBlock `json:"content"`
			Structured any         `json:"structuredContent,omitempty"`
			IsError    bool        `json:"isError"`
		} `json:"result"`
	}{JSONRPC: "2.0"}
	env.Result.Content = []textBlock{{"text", text}}
	env.Result.Structured = structured
	env.Result.IsError = true
	b, err := json.Marshal(env)
	if err != nil {
		return 0, fmt.Errorf("measure tool result: %w", err)
	}
	return len(b) - len(`0`) + EnvelopeIDBytes + len("\n"), nil
}

// NamedStream names a stream summary inside a tool's structured result.
type NamedStream struct {
	Name    string
	Summary *Stream
	// Handle is the action that holds the stream, for the hints; "" is
	// the result's own (ResultSpec.Handle).
	Handle string
	// Heading, when set, is a line the text puts before the stream.
	Heading string
	// NoHint leaves out the ready calls that read the rest of the stream:
	// for a result of many streams whose text says once how to read them.
	NoHint bool
}

// ResultSpec is a finished action, for BuildResult.
type ResultSpec struct {
	// Structured is the tool's structured result; Streams point into it.
	Structured any
	// What says what ran and how it ended, in a sentence or two.
	What    string
	Handle  string
	Streams []NamedStream
}

// BuildResult shrinks the stream previews in spec.Structured until the
// whole response fits resultBytes (see ResultSize), and returns the text
// block: what ran, then each stream framed with its counts and the same
// preview as the structured result, then ready calls for the rest. The
// preview is in the response twice, so a client that shows the model only
// the text still shows it the output. It never cuts JSON; it returns a
// *ResultTooLargeError when the result is too large even with no preview.
func BuildResult(spec ResultSpec, resultBytes int) (string, error) {
	for {
		text := describeResult(&spec)
		size, err := ResultSize(spec.Structured, text)
		if err != nil {
			return "", err
		}
		over := size - resultBytes
		if over <= 0 {
			return text, nil
		}
		if !shrinkLargestPreview(spec.Streams, over) {
			return "", &ResultTooLargeError{Size: size, Budget: resultBytes}
		}
	}
}

// FitText cuts text, the one block of a tool error, at its end until the
// response that carries it fits resultBytes (see ResultSize): an error
// may quote an argument of any size.
func FitText(text string, resultBytes int) string {
	for {
		size, err := ResultSize(nil, text)
		over := size - resultBytes
		if err != nil || over <= 0 {
			return text
		}
		n := len(text) - over - len("...")
		if n <= 0 {
			return ""
		}
		text = Clip(text, n) // shorter than text: Clip adds back only its "..."
	}
}

// JSONLen is the encoded size of a string value, quotes included.
func JSONLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// shrinkLargestPreview cuts the preview that costs the most encoded bytes
// by about over encoded bytes, at a line (or, within a line longer than
// what is left, at a character). Every cut shortens a preview, so the
// caller's loop ends. It reports false when every preview is empty.
func shrinkLargestPreview(streams []NamedStream, over int) bool {
	var pick *string
	var isHead bool
	var sum *Stream
	best := 2 // the size of ""
	for _, ns := range streams {
		for _, p := range []struct {
			s    *string
			head bool
		}{{&ns.Summary.Head, true}, {&ns.Summary.Tail, false}} {
			if n := JSONLen(*p.s); n > best {
				best, pick, isHead, sum = n, p.s, p.head, ns.Summary
			}
		}
	}
	if pick == nil {
		return false
	}
	raw := len(*pick)
	// Assume the bytes cost on average what the whole preview does, twice
	// over: once in structuredContent and once in the text. The caller
	// measures again.
	cost := 2 * best
	cut := min(raw, max(1, (over*raw+cost-1)/cost+8))
	keep := raw - cut
	if isHead {
		h, _ := lineEnd([]byte((*pick)[:keep]))
		*pick = string(h)
	} else {
		t, mid := lineStart([]byte((*pick)[raw-keep:]), (*pick)[raw-keep-1] == '\n')
		*pick, sum.tailMidLine = string(t), mid
	}
	sum.Truncated = int64(len(sum.Head)+len(sum.Tail)) < sum.Bytes
	return true
}

// Example arguments of the hints: a pattern that finds trouble in most
// logs, how many lines around a match, and how many lines a hint reads.
const (
	hintPattern = "error|fail|warn"
	hintContext = 2
	hintLines   = 100
)

func describeResult(spec *ResultSpec) string {
	var b strings.Builder
	b.WriteString(spec.What)
	if !strings.HasSuffix(spec.What, "\n") {
		b.WriteString("\n")
	}
	var more []string
	for _, ns := range spec.Streams {
		if ns.Heading != "" {
			writeLines(&b, ns.Heading)
		}
		v := viewOf(ns.Summary)
		v.write(&b, ns.Name)
		if h := v.hint(cmp.Or(ns.Handle, spec.Handle), ns.Name); h != "" && !ns.NoHint {
			more = append(more, h)
		}
	}
	if len(more) > 0 {
		b.WriteString(strings.Join(more, "\n"))
		b.WriteString("\nOffsets are in the whole stream and lines count from 1; a negative offset counts from the end; search_output takes an RE2 pattern.\n")
	}
	return b.String()
}

// streamView is what the text says of one stream's preview: which lines
// the head and the tail show, and the gap between them.
type streamView struct {
	s *Stream
	// headLines is how many lines Head shows, the last in part when
	// headCut; tailFirst is the number of Tail's first line, in part when
	// tailCut.
	headLines, tailFirst int64
	headCut, tailCut     bool
	// gap is the byte range between Head and Tail; gapFirst and gapLast
	// are the lines it touches.
	gap               ByteRange
	gapFirst, gapLast int64
}

func viewOf(s *Stream) streamView {
	v := streamView{s: s, headLines: linesIn(s.Head), tailFirst: s.Lines - linesIn(s.Tail) + 1}
	v.headCut = s.Head != "" && !strings.HasSuffix(s.Head, "\n") && int64(len(s.Head)) < s.Bytes
	v.tailCut = s.Tail != "" && s.tailMidLine
	v.gap = ByteRange{int64(len(s.Head)), s.Bytes - int64(len(s.Tail))}
	v.gapFirst = int64(strings.Count(s.Head, "\n")) + 1
	v.gapLast = s.Lines
	if s.Tail != "" {
		v.gapLast = v.tailFirst
		if !v.tailCut {
			v.gapLast--
		}
	}
	return v
}

func (v streamView) write(b *strings.Builder, name string) {
	s := v.s
	if s.Bytes == 0 {
		fmt.Fprintf(b, "--- %s: empty ---\n", name)
		return
	}
	fmt.Fprintf(b, "--- %s: %d bytes, %s", name, s.Bytes, Plural(s.Lines, "line"))
	switch {
	case s.Binary:
		b.WriteString("; binary, not shown as text (read_output returns it as base64) ---\n")
	case !s.Truncated:
		b.WriteString("; all shown ---\n")
		writeLines(b, s.Head+s.Tail)
	default:
		fmt.Fprintf(b, "; %s ---\n", v.shown())
		writeLines(b, s.Head)
		fmt.Fprintf(b, "[... %d bytes not shown: %s, offsets %d-%d ...]\n", v.gap.End-v.gap.Start, lineSpan(v.gapFirst, v.gapLast), v.gap.Start, v.gap.End-1)
		writeLines(b, s.Tail)
	}
	if s.Retained != nil || s.SpoolError != "" {
		if missing := gaps(s.Retained, s.Bytes); len(missing) > 0 {
			fmt.Fprintf(b, "(%s: ", name)
			if len(s.Retained) == 0 {
				b.WriteString("nothing of it was kept on disk")
			} else {
				fmt.Fprintf(b, "kept on disk for read_output: %s; the rest was not kept", rangeWords(s.Retained, s.Bytes))
			}
			if s.SpoolError != "" {
				fmt.Fprintf(b, " (spool error: %s)", s.SpoolError)
			}
			b.WriteString(".)\n")
		}
	}
}

// shown says which lines the head and tail of a cut stream show.
func (v streamView) shown() string {
	var spans, cut []string
	if v.s.Head != "" {
		spans = append(spans, lineSpan(1, v.headLines))
		if v.headCut {
			cut = append(cut, fmt.Sprint(v.headLines))
		}
	}
	if v.s.Tail != "" {
		spans = append(spans, lineSpan(v.tailFirst, v.s.Lines))
		if v.tailCut {
			cut = append(cut, fmt.Sprint(v.tailFirst))
		}
	}
	if len(spans) == 0 {
		return "none shown here: the result limit (result_bytes) leaves no room"
	}
	w := "shown: " + strings.Join(spans, " and ")
	switch len(cut) {
	case 1:
		w += " (line " + cut[0] + " in part)"
	case 2:
		w += " (lines " + cut[0] + " and " + cut[1] + " in part)"
	}
	return w
}

// hint returns the ready calls that read what the text does not show, or
// "" when it shows everything.
func (v streamView) hint(handle, name string) string {
	s := v.s
	if !s.Truncated && !s.Binary {
		return ""
	}
	call := func(tool, args string) string {
		return fmt.Sprintf(`%s {"handle":%q,"stream":%q,%s}`, tool, handle, name, args)
	}
	if s.Binary {
		return fmt.Sprintf("To read %s: %s.", name, call("read_output", `"offset":0`))
	}
	h := fmt.Sprintf("To see the rest of %s: %s (bytes from offset %d)", name, call("read_output", fmt.Sprintf(`"offset":%d`, v.gap.Start)), v.gap.Start)
	// Reading by line needs the line's start on disk, where its number is
	// known by counting from the stream's start.
	lineAt := int64(strings.LastIndexByte(s.Head, '\n') + 1)
	if s.Retained == nil && s.SpoolError == "" || len(s.Retained) > 0 && s.Retained[0].Start == 0 && lineAt < s.Retained[0].End {
		n := min(v.gapLast-v.gapFirst+1, hintLines)
		h += fmt.Sprintf(", %s (%s)", call("read_output", fmt.Sprintf(`"line":%d,"lines":%d`, v.gapFirst, n)), lineSpan(v.gapFirst, v.gapFirst+n-1))
	}
	h += fmt.Sprintf(", or %s (matching lines with %d lines around each).", call("search_output", fmt.Sprintf(`"pattern":%q,"context":%d`, hintPattern, hintContext)), hintContext)
	return h
}

// writeLines writes text and ends it with a newline if it has none.
func writeLines(b *strings.Builder, text string) {
	b.WriteString(text)
	if text != "" && !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
}

// lineSpan names the lines first to last.
func lineSpan(first, last int64) string {
	if first >= last {
		return fmt.Sprintf("line %d", first)
	}
	return fmt.Sprintf("lines %d-%d", first, last)
}

// Plural says n of noun, in the plural unless n is 1 ("1 line", "2 lines").
func Plural[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// rangeWords says which byte ranges of a stream of total bytes rs are.
func rangeWords(rs []ByteRange, total int64) string {
	var parts []string
	for _, r := range rs {
		switch {
		case r.Start == 0 && r.End == total:
			parts = append(parts, "all of it")
		case r.Start == 0:
			parts = append(parts, fmt.Sprintf("the first %d bytes", r.End))
		case r.End == total:
			parts = append(parts, fmt.Sprintf("the last %d bytes (from offset %d)", r.End-r.Start, r.Start))
		default:
			parts = append(parts, fmt.Sprintf("offsets %d to %d (%d bytes)", r.Start, r.End-1, r.End-r.Start))
		}
	}
	return strings.Join(parts, " and ")
}

// FitPage trims p.Data until the read_output response fits resultBytes,
// leaving the rest for the next page, and returns its text block.
func FitPage(p *Page, resultBytes int) (string, error) {
	for {
		text := describePage(p)
		size, err := ResultSize(p, text)
		if err != nil {
			return "", err
		}
		over := size - resultBytes
		if over <= 0 {
			return text, nil
		}
		raw := len(p.raw)
		if raw == 0 {
			return "", &ResultTooLargeError{Size: size, Budget: resultBytes}
		}
		best := JSONLen(p.Data)
		keep := raw - min(raw, max(1, (over*raw+best-1)/best+8))
		b := p.raw[:keep]
		if p.Encoding == "" {
			b, _ = lineEnd(b)
		}
		p.cut(b)
	}
}

func describePage(p *Page) string {
	var b strings.Builder
	n := int64(len(p.raw))
	if n == 0 {
		fmt.Fprintf(&b, "%s of %s: no bytes at offset %d of %d", p.Stream, p.Handle, p.Offset, p.TotalBytes)
	} else {
		fmt.Fprintf(&b, "%s of %s: ", p.Stream, p.Handle)
		if p.Line > 0 && p.Encoding == "" {
			fmt.Fprintf(&b, "%s, ", lineSpan(p.Line, p.Line+linesIn(p.Data)-1))
		}
		fmt.Fprintf(&b, "offsets %d to %d (%d bytes) of %d", p.Offset, p.Offset+n-1, n, p.TotalBytes)
	}
	if p.Encoding != "" {
		fmt.Fprintf(&b, ", %s-encoded because they are not UTF-8 text", p.Encoding)
	}
	b.WriteString(".")
	if len(p.Missing) > 0 {
		fmt.Fprintf(&b, " Not kept on disk, so not returned: %s.", rangeWords(p.Missing, p.TotalBytes))
	}
	if p.Interrupted {
		b.WriteString(" The action was interrupted: the server that ran it ended before it finished, so total_bytes is what was found on disk, and the stream may have been longer.")
	}
	if p.EOF {
		b.WriteString(" This is the end of the stream.")
		return b.String()
	}
	if p.Running {
		b.WriteString(" The action is still running: total_bytes is what has arrived so far, and more may come.")
	}
	fmt.Fprintf(&b, ` Next: read_output {"handle":%q,"stream":%q,"offset":%d`, p.Handle, p.Stream, p.NextOffset)
	if p.Running && p.NextOffset >= p.TotalBytes {
		b.WriteString(`,"wait_s":30} (waits for new bytes or the end)`)
	} else {
		b.WriteString("}")
	}
	if p.Line > 0 && p.Encoding == "" && n > 0 && p.Data[n-1] == '\n' && p.NextOffset == p.Offset+n {
		fmt.Fprintf(&b, ` or by line read_output {"handle":%q,"stream":%q,"line":%d}`, p.Handle, p.Stream, p.Line+linesIn(p.Data))
	}
	b.WriteString(".")
	return b.String()
}

// FitSearch drops matches from the end until the search_output response
// fits resultBytes, and returns its text block.
func FitSearch(r *SearchResult, pattern string, resultBytes int) (string, error) {
	for {
		text := describeSearch(r, pattern)
		size, err := ResultSize(r, text)
		if err != nil {
			return "", err
		}
		over := size - resultBytes
		if over <= 0 {
			return text, nil
		}
		if len(r.Matches) == 0 {
			return "", &ResultTooLargeError{Size: size, Budget: resultBytes}
		}
		per := 0
		for _, m := range r.Matches {
			per += JSONLen(m.Text) + 60
			for _, c := range append(m.Before[:len(m.Before):len(m.Before)], m.After...) {
				per += JSONLen(c) + 1
			}
		}
		per /= len(r.Matches)
		drop := min(len(r.Matches), max(1, (over+per-1)/per))
		r.Matches = r.Matches[:len(r.Matches)-drop]
		r.Truncated, r.Reason = true, "result_bytes"
	}
}

func describeSearch(r *SearchResult, pattern string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "search_output on %s of %s for %s: %s", r.Stream, r.Handle, Clip(pattern, 200), Plural(int64(len(r.Matches)), "matching line"))
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, " in the kept bytes; not searched (not kept on disk): %s", rangeWords(r.Missing, -1))
	}
	b.WriteString(".")
	if r.Interrupted {
		b.WriteString(" The action was interrupted: the server that ran it ended before it finished, so only the start of the stream was recovered.")
	}
	if r.Running {
		b.WriteString(" The action is still running: only what had arrived was searched.")
	}
	switch r.Reason {
	case "max_matches":
		b.WriteString(" Stopped at max_matches: there are more; raise max_matches or narrow the pattern.")
	case "time_limit":
		b.WriteString(" Stopped at the time limit before the end: narrow the pattern.")
	case "cancelled":
		b.WriteString(" Cancelled before the end.")
	case "result_bytes":
		b.WriteString(" More matches were found than fit in one result: narrow the pattern or lower max_matches.")
	}
	if len(r.Matches) > 0 {
		m := r.Matches[0]
		first := max(1, m.Line-hintContext*5)
		fmt.Fprintf(&b, ` To read around the first match (line %d): read_output {"handle":%q,"stream":%q,"line":%d,"lines":%d}, or from the start of its line: read_output {"handle":%q,"stream":%q,"offset":%d}.`,
			m.Line, r.Handle, r.Stream, first, m.Line-first+1+hintContext*5, r.Handle, r.Stream, m.LineOffset)
	}
	return b.String()
}
