package feed

import (
	"time"
)

// Serve is one serve process seen by the console.
type Serve struct {
	// ID names the serve across the console's lifetime (its socket name).
	ID      string    `json:"id"`
	PID     int       `json:"pid"`
	Client  string    `json:"client"` // the MCP client's name from initialize
	Started time.Time `json:"started"`
}

// Action is a running or recent action of one serve, as the agent sees it
// (every text redacted).
type Action struct {
	Serve  string `json:"serve"`
	Handle string `json:"handle"`
	Tool   string `json:"tool"`
	Target string `json:"target"`
	// What is the command line, or the method and path.
	What       string    `json:"what"`
	Client     string    `json:"client"`
	Status     string    `json:"status"` // the tool's status: running, ok, failed, cancelled, timed_out, denied…
	Started    time.Time `json:"started"`
	Ended      time.Time `json:"ended,omitzero"` // zero while running
	Background bool      `json:"background,omitempty"`
	// RemoteStopped and StopReason are set for an action that was stopped.
	RemoteStopped *bool  `json:"remote_stopped,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
}

// Output is a piece of an action's output as it arrives, redacted exactly
// as the agent gets it.
type Output struct {
	Serve  string `json:"serve"`
	Handle string `json:"handle"`
	Stream string `json:"stream"` // stdout, stderr, body
	// Offset is of Data's first byte in the redacted stream. One past the
	// end of the stream's last piece means the bytes between were not
	// sent: the output came faster than a console is sent it (the last
	// bytes of each moment go), or the console was not connected.
	Offset int64  `json:"offset"`
	Data   string `json:"data"`
}

// Question is an approval question waiting for a person.
type Question struct {
	Serve  string `json:"serve"`
	ID     string `json:"id"`
	Asked  string `json:"asked"` // command, request, host_key
	Tool   string `json:"tool"`
	Target string `json:"target"`
	// Text is the same quoted text elicitation shows.
	Text string `json:"text"`
	// Remember, when set, offers "approve for" this long.
	Remember time.Duration `json:"remember,omitempty"`
	AskedAt  time.Time     `json:"asked_at"`
	Expires  time.Time     `json:"expires"`
}

// Answer is the person's answer from the console.
type Answer string

// The answers the console can give.
const (
	Approve    Answer = "approve"
	ApproveFor Answer = "approve_for"
	Deny       Answer = "decline"
)

// Event is one thing that happened; exactly one field is set.
type Event struct {
	Serve     *Serve    `json:"serve,omitempty"`      // a serve appeared (or its client name became known)
	ServeGone string    `json:"serve_gone,omitempty"` // a serve's ID: it ended or died
	Action    *Action   `json:"action,omitempty"`     // an action started or changed
	Output    *Output   `json:"output,omitempty"`
	Question  *Question `json:"question,omitempty"` // a question is waiting
	// QuestionGone is a question's ID: answered (here or at the client),
	// expired or withdrawn.
	QuestionGone string `json:"question_gone,omitempty"`
	// Missed counts events this console lost by not reading; a fresh
	// Snapshot is available when it is set.
	Missed int `json:"missed,omitempty"`
}

// Snapshot is the whole current view.
type Snapshot struct {
	Serves    []Serve    `json:"serves"`
	Actions   []Action   `json:"actions"` // running and recent, newest first
	Questions []Question `json:"questions"`
}

// StopResult is what a Stop did, as cancel_action reports it.
type StopResult struct {
	Status        string `json:"status"`
	RemoteStopped bool   `json:"remote_stopped"`
	Reason        string `json:"reason,omitempty"`
}
