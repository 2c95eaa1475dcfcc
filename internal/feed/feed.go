package feed

import (
	"context"
	"errors"
	"time"
)

// ErrNotImplemented is returned by the stubs below until the feed lands.
// (Placeholder for the console work in parallel; removed when the feed is
// implemented.)
var ErrNotImplemented = errors.New("feed: not implemented yet")

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
	Offset int64  `json:"offset"` // of Data's first byte in the redacted stream
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

// Watcher follows every serve on one state directory.
type Watcher struct{}

// Watch starts following the serves on stateDir until ctx ends; Wait
// returns once its goroutines have stopped.
func Watch(ctx context.Context, stateDir string) *Watcher { return &Watcher{} }

// Events delivers what happens, in order per serve. The channel is
// bounded: a reader that falls behind gets an Event with Missed set.
// It is closed when the Watcher stops.
func (w *Watcher) Events() <-chan Event { return nil }

// Snapshot returns the current view.
func (w *Watcher) Snapshot() Snapshot { return Snapshot{} }

// Stop cancels a running action of a serve with cancel_action's verified
// remote stop, and returns once it is known.
func (w *Watcher) Stop(ctx context.Context, serve, handle string) (StopResult, error) {
	return StopResult{}, ErrNotImplemented
}

// Answer answers a waiting question; an error says it was no longer
// waiting (answered elsewhere, expired) or the serve is gone.
func (w *Watcher) Answer(ctx context.Context, serve, question string, a Answer) error {
	return ErrNotImplemented
}

// Wait waits for the Watcher's goroutines after ctx ended.
func (w *Watcher) Wait() {}
