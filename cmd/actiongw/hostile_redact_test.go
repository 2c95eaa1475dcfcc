//go:build linux

package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
)

// hostileEndOfOutput plays the probe that recovered a bearer token which
// is only ever injected into HTTP requests, through ssh_exec alone: the
// token's shape is public ("tok-" and hex), so the agent prints the known
// part and a guessed character at the very end of stdout and of stderr,
// and keeps the guess that comes back replaced. Every guess must come back
// as printed; the whole token comes back redacted, and its outcome names
// the secret the target was never sent.
func hostileEndOfOutput(t *testing.T) {
	s := startServed(t, "signal")
	// The first characters after the public shape: a right guess and
	// every wrong one, for each.
	for k := len("tok-"); k < len("tok-")+4; k++ {
		for _, c := range "0123456789abcdef" {
			guess := s.token[:k] + string(c)
			r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": fmt.Sprintf("printf %%s %s; printf %%s %s >&2", guess, guess)})
			out := decode[gateway.SSHExecOutput](t, r)
			if out.Stdout.Head != guess || out.Stderr.Head != guess {
				t.Fatalf("the guess %q came back as %q on stdout, %q on stderr; want it as printed", guess, out.Stdout.Head, out.Stderr.Head)
			}
		}
	}
	r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": "printf %s " + s.token})
	out := decode[gateway.SSHExecOutput](t, r)
	if out.Stdout.Head != "[REDACTED:api-token]" {
		t.Errorf("the whole token came back as %q; want it redacted", out.Stdout.Head)
	}
	var seen []string
	for line := range strings.Lines(readAuditLog(t, s.state)) {
		var rec audit.Record
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Handle == out.Handle && rec.Kind == audit.KindOutcome {
			seen = rec.SecretsSeen
		}
	}
	if !slices.Equal(seen, []string{"api-token"}) {
		t.Errorf("the outcome names secrets_seen %q; want [api-token], which box was never sent", seen)
	}
	if !strings.Contains(s.stderr.String(), "never sent came back") {
		t.Errorf("serve logged no warning of the secret seen")
	}
	s.client.Close()
	s.assertNoSecretIn(t, s.token)
}

// hostileWrappedBase64: the token, on a host that holds a copy, sent
// through base64(1) and openssl base64 inside longer data, at every
// offset of a line (the hostile round got it back for 34 of 76 offsets
// and 40 of 64); and the SSH key a host holds, as a whole, its body, and
// inside a tar archive, base64 at several widths. No 8 bytes of either
// can be decoded from anything the agent gets back.
func hostileWrappedBase64(t *testing.T) {
	s := startServed(t, "signal")
	dir := s.sshd.UserDir(t)
	tokFile, keyFile := filepath.Join(dir, "tok"), filepath.Join(dir, "id")
	for path, data := range map[string][]byte{tokFile: []byte(s.token), keyFile: s.sshd.ClientKey} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var commands []string
	for pre := range 76 {
		prefix := strings.Repeat("x", pre)
		commands = append(commands,
			fmt.Sprintf("{ printf %s; cat %s; } | base64", prefix, tokFile),
			fmt.Sprintf("{ printf %s; cat %s; } | openssl base64", prefix, tokFile))
	}
	commands = append(commands,
		"base64 "+keyFile, "base64 -w 7 "+keyFile, "openssl base64 -in "+keyFile,
		"grep -v -- ----- "+keyFile, "grep -v -- ----- "+keyFile+" | tr -d '\\n' | fold -w 50",
		"grep -v -- ----- "+keyFile+" | base64", "sed 's/$/\\r/' "+keyFile+" | base64 -w 33",
		fmt.Sprintf("cd %s && tar cf - id | base64", dir), fmt.Sprintf("cd %s && tar cf - id | base64 -w 1000", dir))
	var got bytes.Buffer
	for _, command := range commands {
		r := s.call(t, "ssh_exec", map[string]any{"target": "box", "command": command})
		out := decode[gateway.SSHExecOutput](t, r)
		if out.Status != "exited" || *out.ExitCode != 0 {
			t.Fatalf("%s: %s", command, resultText(r))
		}
		page := s.call(t, "read_output", map[string]any{"handle": out.Handle, "stream": "stdout", "limit": 1 << 20})
		b, _ := json.Marshal(page.StructuredContent)
		var p output.Page
		json.Unmarshal(b, &p)
		for _, secret := range [][]byte{[]byte(s.token), s.sshd.ClientKey} {
			if w := decodable(p.Data, secret); w != nil {
				t.Errorf("%s: %q of a secret can be decoded from %q", command, w, output.Clip(p.Data, 300))
			}
		}
		got.WriteString(p.Data)
	}
	if !strings.Contains(got.String(), "[REDACTED:api-token]") || !strings.Contains(got.String(), "[REDACTED:box-key]") {
		t.Errorf("the outputs hold no marker of the token or of the key")
	}
	s.client.Close()
	s.assertNoSecretIn(t, s.token)
	s.assertNoSecretIn(t, string(s.sshd.ClientKey))
}

// decodable returns the first 8 bytes of secret in a row that can be read
// from text: as it is, with its line breaks taken out, or as base64 of
// either alphabet read from any of the first 4 characters of a run. The
// key's armour lines, which are public, do not count, nor do runs of
// fewer than 5 distinct bytes ("QAAAAAAA" is in an OpenSSH key's body
// and in the base64 of a tar header's zeros alike).
func decodable(text string, secret []byte) []byte {
	joined := strings.NewReplacer("\r", "", "\n", "").Replace(text)
	reads := []string{text, joined}
	for _, run := range strings.FieldsFunc(joined, func(r rune) bool { return !strings.ContainsRune(base64Chars, r) }) {
		for off := 0; off < 4 && off < len(run); off++ {
			r := strings.NewReplacer("-", "+", "_", "/").Replace(run[off:])
			if dec, err := base64.RawStdEncoding.DecodeString(r[:len(r)/4*4]); err == nil {
				reads = append(reads, string(dec))
			}
		}
	}
	public := ""
	for line := range strings.Lines(string(secret)) {
		if strings.HasPrefix(line, "-----") {
			public += line
		}
	}
	for i := 0; i+8 <= len(secret); i++ {
		w := secret[i : i+8]
		distinct := map[byte]bool{}
		for _, c := range w {
			distinct[c] = true
		}
		if strings.Contains(public, string(w)) || len(distinct) < 5 {
			continue
		}
		for _, r := range reads {
			if strings.Contains(r, string(w)) {
				return w
			}
		}
	}
	return nil
}

const base64Chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
