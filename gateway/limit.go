package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/actiongw/actiongw/internal/output"
)

// BusyError is returned when no slot for an action became free within
// queue_wait: the action did not start.
type BusyError struct {
	Target string
	Limit  int    // the limit that was full
	Scope  string // "server", "target" or "background"
	Waited time.Duration
}

func (e *BusyError) Error() string {
	if e.Scope == "background" {
		return fmt.Sprintf("busy: %s already run in the background (max_background_actions); "+
			"wait for one (action_status), stop one (cancel_action), or call with wait_s above 0", output.Plural(e.Limit, "action"))
	}
	return fmt.Sprintf("busy: %s already running (the %s limit for %q), none finished within %v; try again shortly",
		output.Plural(e.Limit, "action"), e.Scope, e.Target, e.Waited.Round(time.Millisecond))
}

// errQueueWait is the cause that ends a call's wait for slots after
// queue_wait.
var errQueueWait = errors.New("queue_wait passed")

// limiter bounds actions running at once on the server; the slots of each
// target come with the configuration (state.slots). A call waits for a slot
// in its handler's goroutine, never in the transport's reader.
type limiter struct {
	log    *slog.Logger
	server chan struct{}
	wait   time.Duration
}

func newLimiter(log *slog.Logger, server int, wait time.Duration) *limiter {
	return &limiter{log: log, server: make(chan struct{}, server), wait: wait}
}

// take takes a slot of ch, the server's (scope "server") or a target's
// (scope "target"; nil for a target without a limit of its own, which
// needs none), waiting until ctx ends: a *BusyError when its cause is
// errQueueWait, else that cause. release gives the slot back.
func (l *limiter) take(ctx context.Context, ch chan struct{}, scope, target string) (release func(), err error) {
	if ch == nil {
		return func() {}, nil
	}
	select { // a free slot wins over a deadline that passed meanwhile
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	default:
	}
	l.log.Debug("waiting for a slot", "scope", scope, "target", target, "limit", cap(ch))
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		if cause := context.Cause(ctx); cause != errQueueWait {
			return nil, cause
		}
		return nil, &BusyError{Target: target, Limit: cap(ch), Scope: scope, Waited: l.wait}
	}
}
