package gateway

// Status is how an action ended, as results and the audit log give it.
type Status string

// Statuses of SSH commands.
const (
	StatusExited      Status = "exited"       // the command exited; see the exit code
	StatusSignaled    Status = "signaled"     // a signal killed the command
	StatusOutputLimit Status = "output_limit" // the target's output_limit stopped the command
)

// Statuses of HTTP requests.
const (
	StatusOK        Status = "ok"         // a 1xx, 2xx or 3xx response, body read whole; a file moved whole
	StatusHTTPError Status = "http_error" // a 4xx or 5xx response, body read whole
	StatusBodyLimit Status = "body_limit" // the body went on past the drain cap and was cut
)

// Statuses of file transfers; a transfer that ended well is StatusOK.
const (
	StatusSizeLimit Status = "size_limit" // the file went on past max_download_bytes; what arrived is kept
)

// Statuses of every kind of action.
const (
	StatusRunning   Status = "running"   // it goes on after its call returned; action_status gives its end
	StatusTimeout   Status = "timeout"   // the action's timeout expired; it was stopped
	StatusCancelled Status = "cancelled" // the client or a shutdown cancelled it; it was stopped
	StatusFailed    Status = "failed"    // it could not run or its connection was lost
	StatusDenied    Status = "denied"    // policy refused it; it did not run
	StatusBusy      Status = "busy"      // no slot or session freed up within queue_wait; it did not run
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
