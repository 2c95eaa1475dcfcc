package output

import (
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
// block: what ran, each stream's size, what is shown and how to get the
// rest. It never cuts JSON; it returns a *ResultTooLargeError when the
// result is too large even with no preview.
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

// jsonLen is the encoded size of a string value, quotes included.
func jsonLen(s string) int {
	b, _ := json.Marshal(s)
	return len(b)
}

// shrinkLargestPreview cuts the preview that costs the most encoded bytes,
// at a character boundary, by about over encoded bytes. It reports false
// when every preview is empty.
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
			if n := jsonLen(*p.s); n > best {
				best, pick, isHead, sum = n, p.s, p.head, ns.Summary
			}
		}
	}
	if pick == nil {
		return false
	}
	raw := len(*pick)
	// Assume the bytes cost on average what the whole preview does; the
	// caller measures again.
	cut := min(raw, max(1, (over*raw+best-1)/best+8))
	keep := raw - cut
	if isHead {
		*pick = string(trimToRuneEnd([]byte((*pick)[:keep])))
	} else {
		*pick = string(trimToRuneStart([]byte((*pick)[raw-keep:])))
	}
	sum.Truncated = int64(len(sum.Head)+len(sum.Tail)) < sum.Bytes
	return true
}

func describeResult(spec *ResultSpec) string {
	var b strings.Builder
	b.WriteString(spec.What)
	b.WriteString("\n")
	var more []string
	for _, ns := range spec.Streams {
		s := ns.Summary
		fmt.Fprintf(&b, "%s: ", ns.Name)
		if s.Bytes == 0 {
			b.WriteString("empty.\n")
			continue
		}
		fmt.Fprintf(&b, "%d bytes, %s", s.Bytes, plural(s.Lines, "line"))
		head, tail := int64(len(s.Head)), int64(len(s.Tail))
		switch {
		case s.Binary:
			b.WriteString(", binary: not shown as text (read_output returns it as base64)")
		case !s.Truncated && tail == 0:
			fmt.Fprintf(&b, ", all shown in %s.head", ns.Name)
		case !s.Truncated:
			fmt.Fprintf(&b, ", all shown in %s.head and %s.tail", ns.Name, ns.Name)
		default:
			fmt.Fprintf(&b, "; shown: %s", shownWords(ns.Name, head, tail, s.Bytes))
		}
		b.WriteString(".")
		if s.Truncated {
			next := head
			fmt.Fprintf(&b, " Not shown: %s.", rangeWords([]ByteRange{{head, s.Bytes - tail}}, s.Bytes))
			more = append(more, fmt.Sprintf(`read_output {"handle":%q,"stream":%q,"offset":%d}`, spec.Handle, ns.Name, next))
		}
		if s.Retained != nil || s.SpoolError != "" {
			if missing := gaps(s.Retained, s.Bytes); len(missing) > 0 {
				if len(s.Retained) == 0 {
					b.WriteString(" Nothing of it was kept on disk")
				} else {
					fmt.Fprintf(&b, " Kept on disk for read_output: %s; the rest was not kept", rangeWords(s.Retained, s.Bytes))
				}
				if s.SpoolError != "" {
					fmt.Fprintf(&b, " (spool error: %s)", s.SpoolError)
				}
				b.WriteString(".")
			}
		}
		b.WriteString("\n")
	}
	if len(more) > 0 {
		b.WriteString("To see the rest: ")
		b.WriteString(strings.Join(more, "; "))
		fmt.Fprintf(&b, ". Offsets are in the whole stream; a negative offset counts from the end. To find lines: search_output {\"handle\":%q,\"stream\":\"<name>\",\"pattern\":\"<RE2>\"}.\n", spec.Handle)
	}
	return b.String()
}

func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func shownWords(name string, head, tail, total int64) string {
	var parts []string
	if head > 0 {
		parts = append(parts, fmt.Sprintf("the first %d bytes in %s.head", head, name))
	}
	if tail > 0 {
		parts = append(parts, fmt.Sprintf("the last %d bytes (from offset %d) in %s.tail", tail, total-tail, name))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, " and ")
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
		best := jsonLen(p.Data)
		keep := raw - min(raw, max(1, (over*raw+best-1)/best+8))
		b := p.raw[:keep]
		if p.Encoding == "" {
			b = trimToRuneEnd(b)
		}
		p.setData(b)
		// A gap after the data is reported by the next page.
		var before []ByteRange
		for _, m := range p.Missing {
			if m.End <= p.Offset {
				before = append(before, m)
			}
		}
		p.Missing = before
		p.NextOffset = p.Offset + int64(len(b))
		p.EOF = p.NextOffset >= p.TotalBytes
	}
}

func describePage(p *Page) string {
	var b strings.Builder
	n := int64(len(p.raw))
	if n == 0 {
		fmt.Fprintf(&b, "%s of %s: no bytes at offset %d of %d", p.Stream, p.Handle, p.Offset, p.TotalBytes)
	} else {
		fmt.Fprintf(&b, "%s of %s: offsets %d to %d (%d bytes) of %d", p.Stream, p.Handle, p.Offset, p.Offset+n-1, n, p.TotalBytes)
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
	} else {
		fmt.Fprintf(&b, ` Next: read_output {"handle":%q,"stream":%q,"offset":%d}.`, p.Handle, p.Stream, p.NextOffset)
	}
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
			per += jsonLen(m.Text) + 40
		}
		per /= len(r.Matches)
		drop := min(len(r.Matches), max(1, (over+per-1)/per))
		r.Matches = r.Matches[:len(r.Matches)-drop]
		r.Truncated, r.Reason = true, "result_bytes"
	}
}

func describeSearch(r *SearchResult, pattern string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "search_output on %s of %s for %s: %s", r.Stream, r.Handle, Clip(pattern, 200), plural(int64(len(r.Matches)), "matching line"))
	if len(r.Missing) > 0 {
		fmt.Fprintf(&b, " in the kept bytes; not searched (not kept on disk): %s", rangeWords(r.Missing, -1))
	}
	b.WriteString(".")
	if r.Interrupted {
		b.WriteString(" The action was interrupted: the server that ran it ended before it finished, so only the start of the stream was recovered.")
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
		fmt.Fprintf(&b, ` To read around a match: read_output {"handle":%q,"stream":%q,"offset":<match offset>}.`, r.Handle, r.Stream)
	}
	return b.String()
}
