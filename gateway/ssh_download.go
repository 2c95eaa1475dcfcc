package gateway

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// SSHDownloadTool is the ssh_download tool.
var SSHDownloadTool = &Tool[SSHDownloadInput, *SSHDownloadOutput]{
	Name: "ssh_download",
	Description: "Read a file from a configured SSH target over SFTP, within the target's allow_paths. Returns the " +
		"file's size, mode, mtime, bytes read and sha256, and the first and last lines of its content (a binary " +
		"file is described, not shown), with a handle: read_output and search_output with stream file give the " +
		"rest, and ssh_upload with from_handle copies it to a target without it passing through the model.",
	Hints: Hints{OpenWorld: true, ReadOnly: true},
	Asks:  true,
	Call:  (*Gateway).SSHDownload,
}

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

// SSHDownload reads one remote file over SFTP into the spool, as an
// action with the stream "file".
func (g *Gateway) SSHDownload(ctx context.Context, in SSHDownloadInput, progress Progress) *ToolResult {
	s, st, fail := g.sshTarget(ctx, in.Target)
	if fail != nil {
		return fail
	}
	k := &sshDownload{session: session{pool: g.ssh, target: st.target}, st: st, in: in}
	return g.run(ctx, s, &action{kind: k, intent: audit.Record{Tool: "ssh_download", Target: in.Target, Path: in.Path}}, progress, in.WaitS)
}

// sshDownload is one ssh_download call: a file read from an SSH target
// over SFTP, in a session of its own.
type sshDownload struct {
	session
	st       *sshTarget
	in       SSHDownloadInput
	maxBytes int64 // max_download_bytes, as check decided
}

var sshDownloadStreams = []string{"file"}

func (k *sshDownload) streams() []string { return sshDownloadStreams }

func (k *sshDownload) check(intent *audit.Record) (policy.Decision, error) {
	d := k.st.rules.DecideTransfer(policy.Transfer{Path: k.in.Path, Timeout: seconds(k.in.TimeoutS)})
	k.maxBytes = d.MaxBytes
	k.name(intent)
	return d, k.st.ready(d.Err)
}

func (k *sshDownload) execute(ctx context.Context, w []io.Writer, _ *atomic.Int64) *ended {
	// The capture (redaction, hashing, the spool) runs beside the SFTP
	// reads, not between them: it took a 1 GiB download through MCP from
	// 0.67 to 0.88 of OpenSSH's sftp.
	aw := output.NewAsyncWriter(w[0], 4, 256<<10)
	res, err := k.leased().Download(ctx, sshexec.DownloadRequest{Path: k.in.Path, Check: k.st.rules.Paths.Check, MaxBytes: k.maxBytes, W: aw})
	aw.Close()
	e := transferEnded(ctx, res, err)
	if e.status == StatusOK && res.Truncated {
		e.status = StatusSizeLimit
		e.reason = fmt.Sprintf("the file is %d bytes; the download stopped at max_download_bytes (%d) of %s, and what arrived is kept", res.Size, k.maxBytes, k.in.Target)
	}
	return e
}

func (k *sshDownload) finish(e *ended) *result {
	out := &SSHDownloadOutput{Handle: e.handle, Target: k.in.Target, Path: k.in.Path, Status: e.status, DurationMS: e.duration.Milliseconds(),
		File: e.streams[0], Reason: e.reason}
	path := e.path
	if t := e.transfer; t != nil {
		// The resolved path is the host's text: redacted like any.
		out.Path, out.Size, out.Bytes = e.resolved, t.Size, t.Bytes
		out.Mode, out.MTime = octal(t.Mode), t.ModTime.UTC().Format(time.RFC3339)
		path = e.resolved
		// The hash of what the file holds, unless redaction changed the
		// kept copy: with the redacted copy beside it, the raw hash would
		// let a guess at the secret be checked.
		switch {
		case t.SHA256 == out.File.SHA256:
			out.SHA256 = t.SHA256
		case e.status == StatusOK:
			out.Reason = joinReason(out.Reason, "the file holds a configured secret: the kept copy (stream file) has it redacted, and the file's own sha256 is not given")
		default:
			// A stream cut short ends with the bytes that could begin a
			// secret replaced: the hashes differ for that.
			out.Reason = joinReason(out.Reason, "the sha256 of the bytes read is not given: the kept copy's last bytes were replaced when it was cut short, in case they began a secret")
		}
	}
	return &result{structured: out, streams: []output.NamedStream{{Name: "file", Summary: &out.File}},
		what: describeTransfer("ssh_download", path, k.in.Target, e, out.Bytes, out.SHA256), isError: out.Status != StatusOK}
}
