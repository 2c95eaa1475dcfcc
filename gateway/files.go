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
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHDownloadInput is the input of the ssh_download tool.
type SSHDownloadInput struct {
	Target   string   `json:"target" jsonschema:"name of an SSH target, as list_targets gives it"`
	Path     string   `json:"path" jsonschema:"remote file to read: absolute, or relative to the login directory; the path and the path it resolves to (symlinks followed) must be within the target's allow_paths"`
	TimeoutS float64  `json:"timeout_s,omitempty" jsonschema:"seconds after which the download is stopped; capped by the target's maximum"`
	WaitS    *float64 `json:"wait_s,omitempty" jsonschema:"seconds this call waits for the download to end (default: the server's wait, 50 s); still running then, it is returned as running with its handle and goes on in the background; 0 starts it in the background"`
}

// SSHDownloadOutput is the structured result of ssh_download.
type SSHDownloadOutput struct {
	Handle string `json:"handle"`
	Target string `json:"target"`
	// Path is the file the server resolved the path to, once it did; else
	// the path asked.
	Path string `json:"path"`
	// Status is running, ok, size_limit, timeout, cancelled, denied or
	// failed.
	Status     Status `json:"status"`
	DurationMS int64  `json:"duration_ms"`
	// Size, Mode (octal) and MTime (RFC 3339) are the file's, as the
	// server reported them before it was read.
	Size  int64  `json:"size"`
	Mode  string `json:"mode,omitempty"`
	MTime string `json:"mtime,omitempty"`
	// Bytes is how many bytes were read, and SHA256 their hash: the
	// file's own when the download is whole. It is withheld when the file
	// holds a configured secret (the file stream has it redacted).
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256,omitempty"`
	// File is the file's content as kept: stream "file" for read_output,
	// search_output and ssh_upload's from_handle.
	File   output.Stream `json:"file"`
	Reason string        `json:"reason,omitempty"`
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

// SSHDownload reads one remote file over SFTP into the spool, as an
// action with the stream "file".
func (g *Gateway) SSHDownload(ctx context.Context, in SSHDownloadInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	var lease *sshexec.Lease
	var maxBytes int64
	return g.run(ctx, s, &action{
		intent: audit.Record{Tool: "ssh_download", Target: in.Target, Path: in.Path},
		check: func(*audit.Record) (policy.Decision, error) {
			d := st.rules.DecideTransfer(policy.Transfer{Path: in.Path, Timeout: seconds(in.TimeoutS)})
			maxBytes = d.MaxBytes
			return d, st.ready(d.Err)
		},
		reserve: g.reserveSession(st, &lease),
		streams: []string{"file"},
		execute: func(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
			// The capture (redaction, hashing, the spool) runs beside the
			// SFTP reads, not between them: it took a 1 GiB download
			// through MCP from 0.67 to 0.88 of OpenSSH's sftp.
			aw := output.NewAsyncWriter(w[0], 4, 256<<10)
			res, err := lease.Download(ctx, sshexec.DownloadRequest{Path: in.Path, Check: st.rules.Paths.Check, MaxBytes: maxBytes, W: aw})
			aw.Close()
			e := transferEnded(ctx, res, err)
			if e.status == StatusOK && res.Truncated {
				e.status = StatusSizeLimit
				e.reason = fmt.Sprintf("the file is %d bytes; the download stopped at max_download_bytes (%d) of %s, and what arrived is kept", res.Size, maxBytes, in.Target)
			}
			return e
		},
		finish: func(e *ended, handle string, s []output.Stream) (any, []output.NamedStream, string, bool) {
			out := &SSHDownloadOutput{Handle: handle, Target: in.Target, Path: in.Path, Status: e.status, DurationMS: e.duration.Milliseconds(),
				File: s[0], Reason: e.reason}
			if t := e.transfer; t != nil {
				// The resolved path is the host's text: redacted like any.
				out.Path, out.Size, out.Bytes = g.redactString(t.Path), t.Size, t.Bytes
				out.Mode, out.MTime = octal(t.Mode), t.ModTime.UTC().Format(time.RFC3339)
				// The hash of what the file holds, unless redaction changed
				// the kept copy: with the redacted copy beside it, the raw
				// hash would let a guess at the secret be checked.
				switch {
				case t.SHA256 == out.File.SHA256:
					out.SHA256 = t.SHA256
				case e.status == StatusOK:
					out.Reason = joinReason(out.Reason, "the file holds a configured secret: the kept copy (stream file) has it redacted, and the file's own sha256 is not given")
				default:
					// A stream cut short ends with the bytes that could
					// begin a secret replaced: the hashes differ for that.
					out.Reason = joinReason(out.Reason, "the sha256 of the bytes read is not given: the kept copy's last bytes were replaced when it was cut short, in case they began a secret")
				}
			}
			return out, []output.NamedStream{{Name: "file", Summary: &out.File}}, describeTransfer("ssh_download", g.redactString(out.Path), in.Target, e, out.Bytes, out.SHA256), out.Status != StatusOK
		},
	}, progress, in.WaitS)
}

// SSHUpload writes one remote file over SFTP, atomically, from content
// the call gives or from a stream an earlier action kept whole.
func (g *Gateway) SSHUpload(ctx context.Context, in SSHUploadInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	var lease *sshexec.Lease
	var maxBytes int64
	var content []byte
	var mode os.FileMode
	var size int64
	intent := audit.Record{Tool: "ssh_upload", Target: in.Target, Path: in.Path}
	if in.FromHandle != "" {
		intent.Source = output.Clip(in.FromHandle, 80) + "/" + output.Clip(in.FromStream, 40)
	}
	return g.run(ctx, s, &action{
		intent: intent,
		check: func(intent *audit.Record) (policy.Decision, error) {
			// The call's own arguments first, then policy, which needs the
			// size.
			d := policy.Decision{}
			var err error
			if mode, err = parseMode(in.Mode); err != nil {
				return d, &unusableError{"mode", "bad mode", err}
			}
			if content, size, err = g.uploadContent(s, in); err != nil {
				return d, err
			}
			intent.Size = size
			d = st.rules.DecideTransfer(policy.Transfer{Path: in.Path, Upload: true, Size: size, Timeout: seconds(in.TimeoutS)})
			maxBytes = d.MaxBytes
			return d, st.ready(d.Err)
		},
		reserve: g.reserveSession(st, &lease),
		execute: func(ctx context.Context, _ []io.Writer, moved *atomic.Int64) *ended {
			var r io.Reader = bytes.NewReader(content)
			if in.FromHandle != "" {
				// Opened again: it was only looked at while checking.
				whole, err := s.core.spool.OpenWhole(in.FromHandle, in.FromStream)
				if err != nil {
					lease.Release()
					return &ended{status: StatusFailed, reason: err.Error()}
				}
				defer whole.Close()
				r = whole
			}
			res, err := lease.Upload(ctx, sshexec.UploadRequest{Path: in.Path, Check: st.rules.Paths.Check, R: &countingReader{r: r, n: moved},
				Size: size, Mode: mode, Overwrite: in.Overwrite, MaxBytes: maxBytes})
			return transferEnded(ctx, res, err)
		},
		finish: func(e *ended, handle string, _ []output.Stream) (any, []output.NamedStream, string, bool) {
			out := &SSHUploadOutput{Handle: handle, Target: in.Target, Path: in.Path, Status: e.status, DurationMS: e.duration.Milliseconds(), Reason: e.reason}
			if t := e.transfer; t != nil {
				out.Path, out.Bytes, out.SHA256 = g.redactString(t.Path), t.Bytes, t.SHA256
				if e.status == StatusOK {
					out.Mode = octal(t.Mode)
				}
			}
			return out, nil, describeTransfer("ssh_upload", g.redactString(out.Path), in.Target, e, out.Bytes, out.SHA256), out.Status != StatusOK
		},
	}, progress, in.WaitS)
}

// ready returns refusal, policy's, or when there is none and the target
// cannot be used, why.
func (st *sshTarget) ready(refusal error) error {
	if refusal == nil && st.err != nil {
		return &unusableError{"credentials", st.err.Error(), st.err} // it names the target
	}
	return refusal
}

// uploadContent returns what an upload sends: the call's content, decoded,
// or the size of the earlier stream it names (read in execute).
func (g *Gateway) uploadContent(s *state, in SSHUploadInput) ([]byte, int64, error) {
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
		return []byte(*in.Content), int64(len(*in.Content)), nil
	case "base64":
		b, err := base64.StdEncoding.DecodeString(*in.Content)
		if err != nil {
			return nil, 0, &unusableError{"content", "content is not base64", fmt.Errorf("content is not valid base64 (standard alphabet, with padding): %v", err)}
		}
		return b, int64(len(b)), nil
	}
	return nil, 0, &unusableError{"encoding", "unknown encoding", fmt.Errorf(`encoding must be "utf8" or "base64", got %q`, output.Clip(in.Encoding, 40))}
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

// transferEnded says how a transfer ended: ok, denied by a path the
// server resolved, stopped by ctx (timeout or cancelled), or failed.
func transferEnded(ctx context.Context, res *sshexec.TransferResult, err error) *ended {
	e := &ended{status: StatusOK, transfer: res}
	if res != nil {
		e.duration = res.Duration
	}
	var de *policy.DeniedError
	var te *timeoutError
	switch {
	case err == nil:
	case errors.As(err, &de):
		e.status, e.rule, e.reason = StatusDenied, de.Rule, de.Error()
	case ctx.Err() != nil && errors.As(context.Cause(ctx), &te):
		e.status, e.reason = StatusTimeout, err.Error()
	case ctx.Err() != nil:
		e.status = StatusCancelled // the pipeline says by whom
	default:
		e.status, e.reason = StatusFailed, err.Error()
	}
	return e
}

// describeTransfer says in words what moved and how it ended.
func describeTransfer(tool, remote, target string, e *ended, n int64, sum string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s on %s: %s, %s", tool, output.Clip(remote, 200), target, e.status, output.Plural(n, "byte"))
	if sum != "" {
		fmt.Fprintf(&b, " (sha256 %s)", sum)
	}
	fmt.Fprintf(&b, " after %d ms.", e.duration.Milliseconds())
	if e.reason != "" {
		fmt.Fprintf(&b, " Reason: %s.", strings.TrimSuffix(e.reason, "."))
	}
	return b.String()
}

func octal(m os.FileMode) string { return fmt.Sprintf("%04o", m.Perm()) }

func joinReason(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// countingReader adds what it reads to n, for progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
