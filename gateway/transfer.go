package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"

	"github.com/actiongw/actiongw/internal/output"
	"github.com/actiongw/actiongw/policy"
	"github.com/actiongw/actiongw/sshexec"
)

// What the file transfers (ssh_download, ssh_upload) share.

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
