package screen

import (
	"bytes"
	"io"
)

// Secret is a value Guard redacts, with the name its marker shows.
type Secret struct {
	Name  string
	Value []byte
}

// maxHeld bounds what Guard holds back while a candidate is open: a
// secret drawn with more codes between its characters than that passes
// (the rendered screen is redacted whole on its own).
const maxHeld = 64 << 10

// A Guard is a stream filter in front of a terminal's redactor: it
// replaces a secret that arrives with terminal codes between its
// characters ("s\x1b[0me\x1b[0mc..."), or typed over with backspaces
// ("sX\bec..."), with "[REDACTED:name]", which the byte redactor, which
// sees the bytes as they are, cannot do. It looks at the visible
// projection of the stream: escape sequences (CSI, OSC and the other
// strings, two-byte escapes) and control bytes dropped, a backspace
// taking back the byte before it. It holds bytes back as the redactor
// does: from where the first 3 visible bytes are a secret's first 3, as
// long as the secret is, whatever follows; so what passes depends on a
// secret only through its first 3 bytes, its length, and whether the
// stream holds it whole.
//
// What it cannot see: a secret drawn out of order (the cursor moved
// back and forth between its characters), or across rows; the screen,
// rendered, is redacted whole for those.
type Guard struct {
	w       io.Writer
	secrets []Secret

	held  []byte // raw bytes not yet written
	vis   []byte // the visible bytes of held
	at    []int  // where each of vis is in held
	state escState
	cut   bool // set by Close(true)
}

// NewGuard returns a Guard writing into w; secrets shorter than 3 bytes
// are ignored (the redactor refuses them too).
func NewGuard(w io.Writer, secrets []Secret) *Guard {
	g := &Guard{w: w}
	for _, s := range secrets {
		if len(s.Value) >= 3 {
			g.secrets = append(g.secrets, s)
		}
	}
	return g
}

type escState uint8

const (
	ground   escState = iota
	escape            // after ESC
	escInter          // ESC and intermediates, until a final byte
	csi               // ESC [, until a final byte
	str               // OSC, DCS, SOS, PM, APC: until BEL or ST
	strEsc            // ESC inside a string: ST if "\"
)

// Write filters p into the writer. It returns len(p), nil, or the
// writer's error.
func (g *Guard) Write(p []byte) (int, error) {
	if len(g.secrets) == 0 || len(g.held) == 0 && g.state == ground && !g.mayBegin(p) {
		return g.w.Write(p) // nothing held, no code, no secret's first byte
	}
	for _, b := range p {
		g.held = append(g.held, b)
		if g.visible(b) {
			g.vis = append(g.vis, b)
			g.at = append(g.at, len(g.held)-1)
		}
	}
	return len(p), g.decide(false)
}

// mayBegin reports whether p holds an escape, a backspace, or a
// secret's first byte: what Write must look at byte by byte.
func (g *Guard) mayBegin(p []byte) bool {
	if bytes.IndexByte(p, 0x1b) >= 0 || bytes.IndexByte(p, '\b') >= 0 {
		return true
	}
	for _, s := range g.secrets {
		if bytes.IndexByte(p, s.Value[0]) >= 0 {
			return true
		}
	}
	return false
}

// visible advances the escape state by b and reports whether b is a
// visible byte; a backspace takes back the last visible byte held.
func (g *Guard) visible(b byte) bool {
	switch g.state {
	case escape:
		switch {
		case b == '[':
			g.state = csi
		case b == ']' || b == 'P' || b == 'X' || b == '^' || b == '_':
			g.state = str
		case b >= 0x20 && b <= 0x2f:
			g.state = escInter
		default:
			g.state = ground
		}
		return false
	case escInter:
		if b >= 0x30 && b <= 0x7e {
			g.state = ground
		}
		return false
	case csi:
		if b >= 0x40 && b <= 0x7e {
			g.state = ground
		}
		return false
	case str:
		switch b {
		case 0x07:
			g.state = ground
		case 0x1b:
			g.state = strEsc
		}
		return false
	case strEsc:
		g.state = str
		if b == '\\' {
			g.state = ground
		}
		return false
	}
	switch {
	case b == 0x1b:
		g.state = escape
		return false
	case b == '\b':
		if n := len(g.vis); n > 0 {
			g.vis, g.at = g.vis[:n-1], g.at[:n-1]
		}
		return false
	case b == '\n' || b == '\r' || b == '\t':
		return true // they break a secret
	case b < 0x20 || b == 0x7f:
		return false
	}
	return true
}

// decide writes what can be decided of what is held; at the end, all of
// it, a candidate open then replaced when cut.
func (g *Guard) decide(end bool) error {
	var out []byte
	for {
		i, need := g.candidate()
		if i < 0 {
			out = append(out, g.held...)
			g.drop(len(g.held), len(g.vis))
			break
		}
		out = append(out, g.held[:g.at[i]]...)
		g.drop(g.at[i], i)
		if len(g.vis) < need && !end && len(g.held) < maxHeld {
			break // wait for the rest
		}
		if s, n := g.match(); s != nil {
			out = append(out, "[REDACTED:"+s.Name+"]"...)
			g.drop(g.at[n-1]+1, n)
			continue
		}
		if len(g.vis) < need && end {
			if !g.cut {
				out = append(out, g.held...)
			} else {
				out = append(out, "[REDACTED]"...)
			}
			g.drop(len(g.held), len(g.vis))
			break
		}
		// No secret here: its first visible byte goes, and the search
		// goes on from the next.
		out = append(out, g.held[:g.at[0]+1]...)
		g.drop(g.at[0]+1, 1)
	}
	if len(out) == 0 {
		return nil
	}
	_, err := g.w.Write(out)
	return err
}

// candidate returns the first visible byte that, with the next ones
// held (up to 3), could begin a secret, and the length of the longest
// secret it could begin; -1 when none.
func (g *Guard) candidate() (int, int) {
	for i := range g.vis {
		need := 0
		for _, s := range g.secrets {
			k := min(3, len(g.vis)-i)
			if bytes.Equal(g.vis[i:i+k], s.Value[:k]) {
				need = max(need, len(s.Value))
			}
		}
		if need > 0 {
			return i, need
		}
	}
	return -1, 0
}

// match returns the secret the visible bytes held begin with, and its
// length; the longest first.
func (g *Guard) match() (*Secret, int) {
	var best *Secret
	for i := range g.secrets {
		s := &g.secrets[i]
		if bytes.HasPrefix(g.vis, s.Value) && (best == nil || len(s.Value) > len(best.Value)) {
			best = s
		}
	}
	if best == nil {
		return nil, 0
	}
	return best, len(best.Value)
}

// drop forgets the first n held bytes, which hold the first k visible
// ones.
func (g *Guard) drop(n, k int) {
	g.held = append(g.held[:0], g.held[n:]...)
	g.vis = append(g.vis[:0], g.vis[k:]...)
	at := g.at[:0]
	for _, a := range g.at[k:] {
		at = append(at, a-n)
	}
	g.at = at
}

// Close writes what is held: an open candidate as it is, or, with cut
// (the stream stopped early, so it could have been a secret's start),
// replaced with a marker.
func (g *Guard) Close(cut bool) error {
	g.cut = cut
	return g.decide(true)
}
