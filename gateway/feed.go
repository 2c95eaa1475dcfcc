package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/actiongw/actiongw/internal/feed"
	"github.com/actiongw/actiongw/internal/output"
)

// Feed is the person's console as the gateway tells it what its actions
// do, and asks it (feed.Server). Its methods never wait on a console.
type Feed interface {
	// Watched reports whether a console follows: output is worth passing.
	Watched() bool
	// Changed tells of an action that started, changed or ended.
	Changed(feed.Action)
	// Output passes a piece of an action's redacted output, at offset in
	// its stream; it does not keep p.
	Output(handle, stream string, offset int64, p []byte)
	// Ask puts a question to the person at the console until ctx ends;
	// posted, if not nil, is called once it waits there, with the
	// address of the question on the console's page ("" when none is
	// known). posted must not block.
	Ask(ctx context.Context, q feed.Question, posted func(page string)) (feed.Answer, error)
}

// SetFeed has the gateway tell f what its actions do from now on, and
// ask the person's questions there as [approval] via says.
func (g *Gateway) SetFeed(f Feed) { g.feed.Store(&f) }

// theFeed is the feed set, or nil.
func (g *Gateway) theFeed() Feed {
	if f := g.feed.Load(); f != nil {
		return *f
	}
	return nil
}

// FeedSource is what a feed.Server shows of the gateway, and stops.
func (g *Gateway) FeedSource() feed.Source { return feedSource{g} }

type feedSource struct{ g *Gateway }

func (s feedSource) Actions() []feed.Action {
	list := s.g.actions.list()
	out := make([]feed.Action, 0, len(list))
	for _, act := range list {
		out = append(out, s.g.feedAction(act))
	}
	return out
}

func (s feedSource) Recent() []feed.Output {
	var out []feed.Output
	for _, act := range s.g.actions.list() {
		act.mu.Lock()
		running := act.status == StatusRunning
		act.mu.Unlock()
		if !running {
			continue
		}
		names := act.a.kind.streams()
		for i, ls := range act.streams[:min(len(act.streams), len(names))] {
			name := names[i]
			ls.mu.Lock()
			off, p := ls.c.Recent(feed.RecentBytes)
			ls.mu.Unlock()
			if len(p) > 0 {
				out = append(out, feed.Output{Handle: act.handle, Stream: name, Offset: off, Data: string(p)})
			}
		}
	}
	return out
}

// errConsoleStop is the cause that ends an action stopped from the
// person's console.
var errConsoleStop = errors.New("stopped from the person's console")

func (s feedSource) Stop(ctx context.Context, handle string) (feed.StopResult, error) {
	g := s.g
	act := g.actions.get(handle)
	if act == nil {
		return feed.StopResult{}, fmt.Errorf("no action %q is known to this server", output.Clip(handle, 80))
	}
	already, err := g.stop(ctx, act, errConsoleStop)
	if err != nil {
		return feed.StopResult{}, err
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	r := feed.StopResult{Status: string(act.status), Reason: act.reason}
	if already {
		r.Reason = "it had already ended; nothing was stopped"
	}
	if act.remoteStopped != nil {
		r.RemoteStopped = *act.remoteStopped
	}
	return r, nil
}

// feedAction is act as the console shows it, every text redacted as the
// agent gets it.
func (g *Gateway) feedAction(act *liveAction) feed.Action {
	what := act.intent.Command
	if act.intent.Method != "" {
		what = act.intent.Method + " " + act.intent.Path
	} else if what == "" {
		what = act.intent.Path // a transfer's
	}
	act.mu.Lock()
	defer act.mu.Unlock()
	return feed.Action{Handle: act.handle, Tool: act.intent.Tool, Target: feed.Clip(g.redactString(act.intent.Target)),
		What: feed.Clip(g.redactString(what)), Status: string(act.status), Started: act.started.UTC(),
		Ended: act.ended.UTC(), Background: act.background,
		RemoteStopped: act.remoteStopped, StopReason: act.reason}
}

// changed tells the feed, if any, that act started, changed or ended.
func (g *Gateway) changed(act *liveAction) {
	if f := g.theFeed(); f != nil {
		f.Changed(g.feedAction(act))
	}
}

// tap has the feed, if any, passed what c keeps of the stream of the
// action handle.
func (g *Gateway) tap(handle, stream string, c *output.Capture) {
	f := g.theFeed()
	if f == nil {
		return
	}
	c.Tap(func(offset int64, p []byte) {
		if f.Watched() {
			f.Output(handle, stream, offset, p)
		}
	})
}
