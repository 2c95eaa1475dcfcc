package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	fastbase64 "github.com/segmentio/asm/base64"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHUploadTool is the ssh_upload tool.
var SSHUploadTool = &Tool[SSHUploadInput, *SSHUploadOutput]{
	Name: "ssh_upload",
	Description: "Write a file on a configured SSH target over SFTP, within the target's allow_paths, atomically: " +
		"a temporary file in the same directory is written, synced and renamed over the path, so the file is " +
		"never half-written. Give content (utf8 or base64), or from_handle and from_stream to send an earlier " +
		"action's stream kept whole (an HTTP body, a downloaded file). An existing file is replaced only with " +
		"overwrite. Returns the bytes sent and their sha256.",
	Hints: Hints{OpenWorld: true, Destructive: true},
	Asks:  true,
	Call:  (*Gateway).SSHUpload,
}

// SSHUploadInput is the input of the ssh_upload tool.
type SSHUploadInput struct {
	Target     string   `json:"target" jsonschema:"name of an SSH target, as list_targets gives it"`
	Path       string   `json:"path" jsonschema:"remote file to write: absolute, or relative to the login directory; the path and the path it resolves to (symlinks followed) must be within the target's allow_paths"`
	Content    *string  `json:"content,omitempty" jsonschema:"the file's content; not with from_handle"`
	Encoding   string   `json:"encoding,omitempty" jsonschema:"how content is given: utf8 (default) or base64"`
	FromHandle string   `json:"from_handle,omitempty" jsonschema:"upload a stream of an earlier action instead of content (an HTTP body, a downloaded file), kept whole by the server; it never passes through the model"`
	FromStream string   `json:"from_stream,omitempty" jsonschema:"with from_handle: the stream, body for http_request, file for ssh_download, stdout or stderr for ssh_exec"`
	Mode       string   `json:"mode,omitempty" jsonschema:"permission bits in octal, e.g. 0640 (default 0644)"`
	Overwrite  bool     `json:"overwrite,omitempty" jsonschema:"replace an existing file (atomically); without it an existing file is refused"`
	TimeoutS   float64  `json:"timeout_s,omitempty" jsonschema:"seconds after which the upload is stopped (the file is then left as it was); capped by the target's maximum"`
	WaitS      *float64 `json:"wait_s,omitempty" jsonschema:"seconds this call waits for the upload to end (default: the server's wait, 50 s); still running then, it is returned as running with its handle and goes on in the background; 0 starts it in the background"`
}

// SSHUploadOutput is the structured result of ssh_upload.
type SSHUploadOutput struct {
	Handle string `json:"handle"`
	Target string `json:"target"`
	// Path is the file written, as the server resolved it, once it did;
	// else the path asked.
	Path string `json:"path"`
	// Status is running, ok, timeout, cancelled, denied or failed. Only
	// ok changed the file.
	Status     Status `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	// Bytes is how many bytes were sent, and SHA256 their hash.
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256,omitempty"`
	Mode   string `json:"mode,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// SSHUpload writes one remote file over SFTP, atomically, from content
// the call gives or from a stream an earlier action kept whole.
func (g *Gateway) SSHUpload(ctx context.Context, in SSHUploadInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	intent := audit.Record{Tool: "ssh_upload", Target: in.Target, Path: in.Path}
	if in.FromHandle != "" {
		intent.Source = output.Clip(in.FromHandle, 80) + "/" + output.Clip(in.FromStream, 40)
	}
	k := &sshUpload{session: session{pool: g.ssh, target: st.target}, s: s, st: st, in: in}
	return g.run(ctx, s, &action{kind: k, intent: intent}, progress, in.WaitS)
}

// sshUpload is one ssh_upload call: a file written on an SSH target over
// SFTP, in a session of its own.
type sshUpload struct {
	session
	s  *state
	st *sshTarget
	in SSHUploadInput
	// What check found: the content (when the call gives it), to be
	// read once by execute, its size and mode, and max_upload_bytes.
	content  io.Reader
	size     int64
	mode     os.FileMode
	maxBytes int64
}

func (k *sshUpload) streams() []string { return nil }

// check: the call's own arguments first, then policy, which needs the
// size, then the target's credentials.
func (k *sshUpload) check(intent *audit.Record) (policy.Decision, error) {
	var err error
	if k.mode, err = parseMode(k.in.Mode); err != nil {
		return policy.Decision{}, &unusableError{"mode", "bad mode", err}
	}
	if k.content, k.size, err = uploadContent(k.s, k.in); err != nil {
		return policy.Decision{}, err
	}
	intent.Size = k.size
	d := k.st.rules.DecideTransfer(policy.Transfer{Path: k.in.Path, Upload: true, Size: k.size, Timeout: seconds(k.in.TimeoutS)})
	k.maxBytes = d.MaxBytes
	k.name(intent)
	return d, k.st.ready(d.Err)
}

func (k *sshUpload) execute(ctx context.Context, _ []io.Writer, moved *atomic.Int64) *ended {
	r := k.content
	if k.in.FromHandle != "" {
		// Opened again: it was only looked at while checking.
		whole, err := k.s.core.spool.OpenWhole(k.in.FromHandle, k.in.FromStream)
		if err != nil {
			k.lease.Release()
			return &ended{status: StatusFailed, reason: err.Error()}
		}
		defer whole.Close()
		r = whole
	}
	res, err := k.leased().Upload(ctx, sshexec.UploadRequest{Path: k.in.Path, Check: k.st.rules.Paths.Check, R: &countingReader{r: r, n: moved},
		Size: k.size, Mode: k.mode, Overwrite: k.in.Overwrite, MaxBytes: k.maxBytes})
	return transferEnded(ctx, res, err)
}

func (k *sshUpload) drop() { k.content, k.in.Content = nil, nil }

func (k *sshUpload) finish(e *ended) *result {
	out := &SSHUploadOutput{Handle: e.handle, Target: k.in.Target, Path: k.in.Path, Status: e.status, DurationMS: e.duration.Milliseconds(), Reason: e.reason}
	path := e.path
	if t := e.transfer; t != nil {
		out.Path, out.Bytes, out.SHA256 = e.resolved, t.Bytes, t.SHA256
		path = e.resolved
		if e.status == StatusOK {
			out.Mode = octal(t.Mode)
		}
	}
	return &result{structured: out, what: describeTransfer("ssh_upload", path, k.in.Target, e, out.Bytes, out.SHA256), isError: out.Status != StatusOK}
}

// uploadContent returns what an upload sends: the call's content, decoded,
// or the size of the earlier stream it names (read in execute). Base64 in
// its plain form is checked here and decoded while it is sent, so the
// decoding runs beside the transfer instead of before it, and no decoded
// copy of the whole content is made (7 MB of base64 for 5 MiB was decoded
// in some 10 ms first, on a loaded machine, and the collector ran for it).
func uploadContent(s *state, in SSHUploadInput) (io.Reader, int64, error) {
	switch {
	case in.FromHandle != "" && in.Content != nil:
		return nil, 0, &unusableError{"content", "content and from_handle", errors.New("give either content or from_handle, not both")}
	case in.FromHandle != "":
		if in.FromStream == "" {
			return nil, 0, &unusableError{"from_stream", "no from_stream",
				errors.New("from_handle needs from_stream: body for http_request, file for ssh_download, stdout or stderr for ssh_exec")}
		}
		if in.Encoding != "" {
			return nil, 0, &unusableError{"encoding", "encoding with from_handle", errors.New("encoding applies to content, not to from_handle: a stream is sent as kept")}
		}
		whole, err := s.core.spool.OpenWhole(in.FromHandle, in.FromStream)
		if err != nil {
			return nil, 0, &unusableError{"from_handle", "stream not usable", err}
		}
		defer whole.Close()
		return nil, whole.Size(), nil
	case in.Content == nil:
		return nil, 0, &unusableError{"content", "no content", errors.New(`give the file's content (content, with encoding "utf8" or "base64") or from_handle and from_stream`)}
	}
	switch in.Encoding {
	case "", "utf8":
		return strings.NewReader(*in.Content), int64(len(*in.Content)), nil
	case "base64":
		if n, ok := plainBase64Len(*in.Content); ok {
			return &base64Reader{text: *in.Content}, n, nil
		}
		// Line breaks, or not base64: decoded whole, for the decoder's
		// own error.
		b, err := base64.StdEncoding.DecodeString(*in.Content)
		if err != nil {
			return nil, 0, &unusableError{"content", "content is not base64", fmt.Errorf("content is not valid base64 (standard alphabet, with padding): %v", err)}
		}
		return bytes.NewReader(b), int64(len(b)), nil
	}
	return nil, 0, &unusableError{"encoding", "unknown encoding", fmt.Errorf(`encoding must be "utf8" or "base64", got %q`, output.Clip(in.Encoding, 40))}
}

// base64Alphabet marks the bytes of the standard base64 alphabet.
var base64Alphabet = func() (a [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		a[c] = true
	}
	return a
}()

// plainBase64Len reports whether s is standard base64 in its plain form:
// whole quanta of the alphabet, the last padded with at most two '=', no
// line breaks. Every such s decodes without error (base64.StdEncoding
// takes any trailing bits), to the length returned; anything else is left
// to the decoder.
func plainBase64Len(s string) (int64, bool) {
	if len(s)%4 != 0 {
		return 0, false
	}
	if len(s) == 0 {
		return 0, true
	}
	for i := range len(s) - 4 {
		if !base64Alphabet[s[i]] {
			return 0, false
		}
	}
	last := s[len(s)-4:]
	pad := len(last) - len(strings.TrimRight(last, "="))
	if pad > 2 {
		return 0, false
	}
	for i := range len(last) - pad {
		if !base64Alphabet[last[i]] {
			return 0, false
		}
	}
	return int64(len(s)/4*3 - pad), true
}

// base64Reader decodes plain base64 (plainBase64Len said so) as it is
// read, a block at a time, with the vectorised decoder of
// github.com/segmentio/asm, which the SDK's JSON already builds in: for an
// upload's 7 MB the standard decoder took some 5 ms of the call.
type base64Reader struct {
	text    string // not yet decoded: whole quanta
	decoded []byte // decoded, not yet read
	block   [48 << 10]byte
}

func (r *base64Reader) Read(p []byte) (int, error) {
	if len(r.decoded) == 0 {
		if r.text == "" {
			return 0, io.EOF
		}
		text := r.text[:min(len(r.text), len(r.block)/3*4)]
		// The decoder only reads its source.
		n, err := fastbase64.StdEncoding.Decode(r.block[:], unsafe.Slice(unsafe.StringData(text), len(text)))
		if err != nil {
			return 0, fmt.Errorf("decoding base64 content: %w", err) // plainBase64Len rules it out
		}
		r.text, r.decoded = r.text[len(text):], r.block[:n]
	}
	n := copy(p, r.decoded)
	r.decoded = r.decoded[n:]
	return n, nil
}

// parseMode reads an upload's permission bits in octal; "" is 0644.
func parseMode(s string) (os.FileMode, error) {
	if s == "" {
		return 0o644, nil
	}
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf(`mode must be permission bits in octal, 0000 to 0777 (e.g. "0640"), got %q; setuid, setgid and sticky bits are never set`, output.Clip(s, 40))
	}
	return os.FileMode(m), nil
}
