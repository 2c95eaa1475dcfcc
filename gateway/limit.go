package gateway

import (
	"context"
	"fmt"
	"time"
)

// BusyError is returned when no slot for an action became free in time.
type BusyError struct {
	Target string
	Limit  int    // the limit that was full
	Scope  string // "server" or "target"
	Waited time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("busy: %d action(s) already running (the %s limit for %q), none finished within %v; try again shortly",
		e.Limit, e.Scope, e.Target, e.Waited.Round(time.Millisecond))
}

// limiter bounds actions running at once, for the server and per target.
// A call waits up to wait for a slot; the waiting happens in the handler's
// goroutine, never in the transport's reader.
type limiter struct {
	server    chan struct{}
	perTarget map[string]chan struct{}
	wait      time.Duration
}

func newLimiter(server int, perTarget map[string]int, wait time.Duration) *limiter {
	l := &limiter{server: make(chan struct{}, server), perTarget: map[string]chan struct{}{}, wait: wait}
	for name, n := range perTarget {
		if n > 0 {
			l.perTarget[name] = make(chan struct{}, n)
		}
	}
	return l
}

// acquire takes a server slot and the target's slot, or returns a
// *BusyError after wait, or ctx's error. release gives back what it took.
func (l *limiter) acquire(ctx context.Context, target string) (release func(), err error) {
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	take := func(ch chan struct{}, scope string) error {
		select {
		case ch <- struct{}{}:
			return nil
		case <-timer.C:
			return &BusyError{Target: target, Limit: cap(ch), Scope: scope, Waited: l.wait}
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	t := l.perTarget[target]
	if t != nil {
		if err := take(t, "target"); err != nil {
			return nil, err
		}
	}
	if err := take(l.server, "server"); err != nil {
		if t != nil {
			<-t
		}
		return nil, err
	}
	return func() {
		<-l.server
		if t != nil {
			<-t
		}
	}, nil
}
