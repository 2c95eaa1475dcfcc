package gateway

import (
	"github.com/actiongw/actiongw/httpact"
	"github.com/actiongw/actiongw/sshexec"
)

// Status is how an action ended, as results and the audit log give it.
// How a command or a request ended is decided below, by sshexec and
// httpact (timeout against cancelled too): the gateway converts their
// word and never decides it again.
type Status string

// Statuses of SSH commands, sshexec's.
const (
	StatusExited      = Status(sshexec.StatusExited)      // the command exited; see the exit code
	StatusSignaled    = Status(sshexec.StatusSignaled)    // a signal killed the command
	StatusOutputLimit = Status(sshexec.StatusOutputLimit) // the target's output_limit stopped the command
)

// Statuses of HTTP requests, httpact's.
const (
	StatusOK        = Status(httpact.StatusOK)        // a 1xx, 2xx or 3xx response, body read whole; a file moved whole
	StatusHTTPError = Status(httpact.StatusHTTPError) // a 4xx or 5xx response, body read whole
	StatusBodyLimit = Status(httpact.StatusBodyLimit) // the body went on past the drain cap and was cut
)

// Statuses of file transfers; a transfer that ended well is StatusOK.
const (
	StatusSizeLimit Status = "size_limit" // the file went on past max_download_bytes; what arrived is kept
)

// Statuses of every kind of action; sshexec and httpact say the first
// three in the same words.
const (
	StatusTimeout          = Status(sshexec.StatusTimeout)   // the action's timeout expired; it was stopped
	StatusCancelled        = Status(sshexec.StatusCancelled) // the client or a shutdown cancelled it; it was stopped
	StatusFailed           = Status(sshexec.StatusFailed)    // it could not run or its connection was lost
	StatusRunning   Status = "running"                       // it goes on after its call returned; action_status gives its end
	StatusDenied    Status = "denied"                        // policy refused it; it did not run
	StatusBusy      Status = "busy"                          // no slot or session freed up within queue_wait; it did not run
)

// cutShort reports whether an action with this status may have stopped in
// the middle of its output.
func (s Status) cutShort() bool {
	switch s {
	case StatusExited, StatusSignaled, StatusOK, StatusHTTPError:
		return false
	}
	return true
}
