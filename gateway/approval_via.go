package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/internal/feed"
)

// Where an answer came from, in the audit's approvals (audit.Approval.Via).
const (
	viaClient  = "client"
	viaConsole = "console"
)

// errAnsweredElsewhere withdraws the question of one place once the
// other answered it (via "either").
var errAnsweredElsewhere = errors.New("answered in the other place it was asked")

// ask puts q to the person where via says ([approval] via): at the
// client through ap, at the console f (nil: none), or both, the first
// answer winning and the other question withdrawn before ask returns. A
// client that cannot ask has its question go to the console unless via
// is client. It returns what Approver.Ask does, and where the answer came
// from.
func (g *Gateway) ask(ctx context.Context, via string, ap Approver, f Feed, a *action, q *Question) (Answer, time.Duration, string, error) {
	client := func(ctx context.Context, q *Question) (Answer, time.Duration, error) {
		if ap == nil {
			return "", 0, &CannotAskError{Reason: "this server has no client to ask"}
		}
		return ap.Ask(ctx, q)
	}
	// The client is pointed to the console's page where it is not asked
	// itself: via console, or via either when it cannot ask.
	pointer, _ := ap.(Pointer)
	console := func(ctx context.Context, point Pointer) (Answer, time.Duration, error) {
		return g.askConsole(ctx, f, a, q, point)
	}
	switch {
	case f == nil || via == config.ViaClient:
		ans, took, err := client(ctx, q)
		return ans, took, viaClient, err
	case via == config.ViaConsole:
		ans, took, err := console(ctx, pointer)
		return ans, took, viaConsole, err
	}

	// Either: the client must ask now, not send the question back with
	// the call's result (the call would be gone when the console's
	// answer came).
	now := *q
	now.NowOnly = true
	type asked struct {
		ans  Answer
		took time.Duration
		via  string
		err  error
	}
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	got := make(chan asked, 2)
	var wg sync.WaitGroup
	cannotAsk := make(chan struct{}) // closed when the client cannot ask
	wg.Go(func() {
		ans, took, err := client(bctx, &now)
		if _, ok := errors.AsType[*CannotAskError](err); ok {
			close(cannotAsk)
		}
		got <- asked{ans, took, viaClient, err}
	})
	var point Pointer
	if pointer != nil {
		point = pointOnce{pointer, cannotAsk}
	}
	wg.Go(func() {
		ans, took, err := console(bctx, point)
		got <- asked{ans, took, viaConsole, err}
	})
	defer wg.Wait()
	first := <-got
	var cannot *CannotAskError
	if errors.As(first.err, &cannot) {
		// This place cannot ask: the other one's answer counts.
		second := <-got
		if errors.As(second.err, &cannot) {
			second.err = &CannotAskError{Reason: first.via + ": " + first.err.Error() + "; " + second.via + ": " + second.err.Error()}
		}
		return second.ans, second.took, second.via, second.err
	}
	cancel(errAnsweredElsewhere)
	<-got
	return first.ans, first.took, first.via, first.err
}

// pointOnce points the client to the console only once ready is closed:
// via either, when the client cannot ask itself.
type pointOnce struct {
	Pointer
	ready <-chan struct{}
}

func (p pointOnce) Point(ctx context.Context, q *Question, page string) {
	select {
	case <-p.ready:
		p.Pointer.Point(ctx, q, page)
	case <-ctx.Done():
	}
}

// waitingEvery is how often a call whose question waits in the console
// says so in a progress notification.
const waitingEvery = 5 * time.Second

// askConsole puts q to the person at the console f, and waits for the
// answer until q.Timeout (AnswerTimeout) or until ctx ends; meanwhile
// the call's progress says it waits for the person in the console, and
// point, if not nil, is handed the question's place on the console's
// page until the wait ends.
func (g *Gateway) askConsole(ctx context.Context, f Feed, a *action, q *Question, point Pointer) (Answer, time.Duration, error) {
	if f == nil {
		return "", 0, &CannotAskError{Reason: "[approval] via is console, and this server has no console socket (its log says why)"}
	}
	start := time.Now()
	tctx, cancel := context.WithTimeout(ctx, q.Timeout)
	defer cancel()
	stop := reportWaiting(a.progress, start)
	defer stop()
	var posted func(page string)
	if point != nil {
		// The pointing ends with the wait: pctx ends before askConsole
		// returns, and the goroutine with it.
		pctx, unpoint := context.WithCancel(tctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer unpoint()
		posted = func(page string) {
			if page != "" {
				wg.Go(func() { point.Point(pctx, q, page) })
			}
		}
	}
	fa, err := f.Ask(tctx, feed.Question{Asked: string(q.Asked), Tool: a.intent.Tool, Target: q.Target,
		Text: q.Message, Remember: q.Remember}, posted)
	took := time.Since(start)
	switch {
	case ctx.Err() != nil:
		return "", took, ctx.Err()
	case tctx.Err() != nil:
		return AnswerTimeout, took, nil
	case err != nil:
		return "", took, &CannotAskError{Reason: fmt.Sprintf("the console could not ask: %v", err)}
	}
	switch fa {
	case feed.Approve:
		return AnswerApprove, took, nil
	case feed.ApproveFor:
		return AnswerApproveFor, took, nil
	case feed.Deny:
		return AnswerDecline, took, nil
	}
	return "", took, &CannotAskError{Reason: fmt.Sprintf("the console answered %.32q, which the question did not offer", fa)}
}

// reportWaiting tells progress, if any, at once and every waitingEvery,
// that the call waits for the person in the console, until stop, which
// waits for its goroutine.
func reportWaiting(progress Progress, start time.Time) (stop func()) {
	if progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(waitingEvery)
		defer tick.Stop()
		for {
			progress(ProgressReport{Elapsed: time.Since(start), Waiting: true})
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}
