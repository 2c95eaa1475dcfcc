package sshexec

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// maxVersionBytes bounds the version line kept (RFC 4253 allows 255
// bytes, CR LF included; x/crypto reads no more).
const maxVersionBytes = 255

// versionLine records the identification line a server announces
// (RFC 4253 section 4.2, "SSH-2.0-OpenSSH_9.2p1 Debian-2"), as the
// handshake reads it: the first line that starts with "SSH-", the lines
// before it skipped, as x/crypto skips them.
type versionLine struct {
	line []byte
	done bool
}

// record looks at bytes read from the server until the line is whole.
func (v *versionLine) record(p []byte) {
	for _, b := range p {
		if b == '\n' {
			if bytes.HasPrefix(v.line, []byte("SSH-")) {
				v.done = true
				return
			}
			v.line = v.line[:0]
			continue
		}
		if len(v.line) < maxVersionBytes {
			v.line = append(v.line, b)
		}
	}
}

// String is the line announced, without its CR; empty until it is whole.
// It is the server's, untrusted: quote it.
func (v *versionLine) String() string {
	if !v.done {
		return ""
	}
	return strings.TrimSuffix(string(v.line), "\r")
}

// openSSHVersion parses the release of an OpenSSH server from the line
// it announced: 9.2 from "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3",
// 8.1 from "SSH-2.0-OpenSSH_for_Windows_8.1". ok is false when the
// server is not OpenSSH or its release has no major.minor.
func openSSHVersion(announced string) (major, minor int, ok bool) {
	rest, found := strings.CutPrefix(announced, "SSH-2.0-")
	if !found {
		if rest, found = strings.CutPrefix(announced, "SSH-1.99-"); !found {
			return 0, 0, false
		}
	}
	software, _, _ := strings.Cut(rest, " ") // then comments
	if software, found = strings.CutPrefix(software, "OpenSSH_"); !found {
		return 0, 0, false
	}
	software = strings.TrimPrefix(software, "for_Windows_")
	major, rest, ok = leadingNumber(software)
	if !ok || !strings.HasPrefix(rest, ".") {
		return 0, 0, false
	}
	minor, _, ok = leadingNumber(rest[1:])
	if !ok {
		return 0, 0, false
	}
	return major, minor, true
}

// leadingNumber parses the decimal digits s starts with (one to nine:
// no sign, no overflow), and returns what follows them.
func leadingNumber(s string) (n int, rest string, ok bool) {
	end := 0
	for end < len(s) && end < 9 && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0, s, false
	}
	n, err := strconv.Atoi(s[:end])
	return n, s[end:], err == nil
}

// caNeeds are the OpenSSH releases a CA target's certificates need, the
// oldest first.
var caNeeds = []struct {
	major, minor int
	what         string
}{
	{5, 6, "certificates with a force-command (the v01 format)"},
	{6, 5, "ed25519 certificates, which every action's key is"},
}

// caVersionAdvice says what the version a host announced means for a
// CA target's certificates: the cause of a refusal when it is older than
// they need. The version is quoted: it is the server's text.
func caVersionAdvice(announced string) (advice string, tooOld bool) {
	if announced == "" {
		return "its sshd must be " + caNeedsText(), false
	}
	major, minor, ok := openSSHVersion(announced)
	if !ok {
		return fmt.Sprintf("the host announced %q, which is not OpenSSH: its server must accept OpenSSH certificates "+
			"(TrustedUserCAKeys, force-command, ed25519 keys, as %s does)", announced, caNeedsText()), false
	}
	var missing []string
	for _, n := range caNeeds {
		if major < n.major || major == n.major && minor < n.minor {
			missing = append(missing, fmt.Sprintf("OpenSSH %d.%d for %s", n.major, n.minor, n.what))
		}
	}
	if len(missing) > 0 {
		return fmt.Sprintf("the host announced %q: OpenSSH %d.%d is older than %s; that is why it refused: upgrade its sshd",
			announced, major, minor, strings.Join(missing, " and ")), true
	}
	return fmt.Sprintf("the host announced %q, recent enough (%s)", announced, caNeedsText()), false
}

// caNeedsText is the release caNeeds add up to, and why: "OpenSSH 6.5
// or later: 5.6 for …, 6.5 for …".
func caNeedsText() string {
	need := caNeeds[len(caNeeds)-1]
	parts := make([]string, len(caNeeds))
	for i, n := range caNeeds {
		parts[i] = fmt.Sprintf("%d.%d for %s", n.major, n.minor, n.what)
	}
	return fmt.Sprintf("OpenSSH %d.%d or later: %s", need.major, need.minor, strings.Join(parts, ", "))
}
