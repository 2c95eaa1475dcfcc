package feed

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/owner"
)

// pollEvery is how often a Watcher looks for serves that started or
// whose socket is gone.
const pollEvery = 300 * time.Millisecond

// eventsBuffer is the room of a Watcher's Events channel.
const eventsBuffer = 1024

// maxActionsPerServe bounds the actions a Watcher keeps of one serve: a
// serve keeps fewer (its running ones and its last finished), but does
// not say when it forgets one.
const maxActionsPerServe = 2000

// requestWait bounds writing a request to a serve that does not read.
const requestWait = 5 * time.Second

// ErrServeGone is the error of a Stop or Answer for a serve that is not
// (or no longer) connected.
var ErrServeGone = errors.New("that serve is gone")

// Watcher follows every serve on one state directory.
type Watcher struct {
	dir    string
	events chan Event
	wg     sync.WaitGroup // the poll loop
	conns  sync.WaitGroup // each serve's reader

	mu     sync.Mutex
	serves map[string]*followed // by Serve.ID, connected
	page   string               // the console's page, told every serve (SetPage)

	sendMu sync.Mutex
	missed int // events not delivered since the last Missed
}

// followed is one serve a Watcher is connected to, and its view.
type followed struct {
	id   owner.ID
	path string
	c    net.Conn
	done chan struct{} // closed when the connection is gone

	wmu    sync.Mutex // writes
	nextID atomic.Uint64

	// Under the Watcher's mu:
	ready     bool // its first snapshot arrived
	info      Serve
	actions   map[string]Action
	questions map[string]Question
	replies   map[uint64]chan reply
	missed    int // the serve said it dropped events; its snapshot follows
}

// Watch starts following the serves on stateDir until ctx ends; Wait
// returns once its goroutines have stopped.
func Watch(ctx context.Context, stateDir string) *Watcher {
	w := &Watcher{dir: Dir(stateDir), events: make(chan Event, eventsBuffer), serves: map[string]*followed{}}
	w.wg.Go(func() { w.poll(ctx) })
	return w
}

// Events delivers what happens, in order per serve. The channel is
// bounded: a reader that falls behind gets an Event with Missed set.
// It is closed when the Watcher stops.
func (w *Watcher) Events() <-chan Event { return w.events }

// Wait waits for the Watcher's goroutines after ctx ended.
func (w *Watcher) Wait() { w.wg.Wait() }

// poll looks for serves every pollEvery until ctx ends, then drops
// every serve and closes Events.
func (w *Watcher) poll(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		w.scan(ctx)
		select {
		case <-ctx.Done():
			w.mu.Lock()
			for _, f := range w.serves {
				f.c.Close()
			}
			w.mu.Unlock()
			w.conns.Wait()
			close(w.events)
			return
		case <-t.C:
		}
	}
}

// scan connects to the serves whose sockets appeared, drops those whose
// socket is gone, and removes the sockets of serves that died.
func (w *Watcher) scan(ctx context.Context) {
	entries, err := os.ReadDir(w.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	present := map[string]bool{}
	for _, e := range entries {
		id := serveOf(e.Name())
		if id == "" || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		present[string(id)] = true
		w.mu.Lock()
		_, known := w.serves[string(id)]
		w.mu.Unlock()
		if known {
			continue
		}
		path := filepath.Join(w.dir, e.Name())
		if !id.Alive() {
			_ = os.Remove(path) // its serve died without removing it
			continue
		}
		var d net.Dialer
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "unix", path)
		cancel()
		if err != nil {
			continue // starting or ending: the next scan sees which
		}
		f := &followed{id: id, path: path, c: c, done: make(chan struct{}),
			actions: map[string]Action{}, questions: map[string]Question{}, replies: map[uint64]chan reply{}}
		w.mu.Lock()
		w.serves[string(id)] = f
		page := w.page
		w.mu.Unlock()
		if page != "" {
			w.tellPage(f, page)
		}
		w.conns.Go(func() { w.follow(f) })
	}
	w.mu.Lock()
	for id, f := range w.serves {
		if !present[id] {
			f.c.Close() // its socket is gone: the serve is ending
		}
	}
	w.mu.Unlock()
}

// follow reads one serve's frames until its connection ends, then drops
// the serve.
func (w *Watcher) follow(f *followed) {
	defer w.drop(f)
	sc := bufio.NewScanner(f.c)
	sc.Buffer(make([]byte, 0, 64<<10), maxFrameBytes)
	for sc.Scan() {
		var fr serveFrame
		if err := json.Unmarshal(sc.Bytes(), &fr); err != nil {
			return
		}
		switch {
		case fr.Snapshot != nil:
			w.snapshot(f, fr.Snapshot)
		case fr.Event != nil:
			w.event(f, fr.Event)
		case fr.Reply != nil:
			w.mu.Lock()
			ch := f.replies[fr.Reply.ID]
			delete(f.replies, fr.Reply.ID)
			w.mu.Unlock()
			if ch != nil {
				ch <- *fr.Reply
			}
		}
	}
}

// drop forgets a serve whose connection ended.
func (w *Watcher) drop(f *followed) {
	f.c.Close()
	close(f.done)
	w.mu.Lock()
	delete(w.serves, string(f.id))
	ready := f.ready
	w.mu.Unlock()
	if ready {
		w.emit(Event{ServeGone: string(f.id)})
	}
	if !f.id.Alive() {
		_ = os.Remove(f.path)
	}
}

// snapshot takes a serve's whole view. The first tells of the serve and
// everything in it as events; a later one follows events the serve
// dropped, and the console is told to read the Snapshot again.
func (w *Watcher) snapshot(f *followed, s *Snapshot) {
	w.mu.Lock()
	first := !f.ready
	f.ready = true
	if len(s.Serves) > 0 {
		f.info = s.Serves[0]
	}
	f.info.ID = string(f.id)
	clear(f.actions)
	clear(f.questions)
	for _, a := range s.Actions {
		a.Serve = string(f.id)
		f.actions[a.Handle] = a
	}
	for _, q := range s.Questions {
		q.Serve = string(f.id)
		f.questions[q.ID] = q
	}
	missed := f.missed
	f.missed = 0
	info := f.info
	actions := slices.Collect(maps.Values(f.actions))
	questions := slices.Collect(maps.Values(f.questions))
	w.mu.Unlock()
	if !first {
		w.emit(Event{Missed: max(missed, 1)})
		return
	}
	w.emit(Event{Serve: &info})
	slices.SortFunc(actions, func(a, b Action) int { return a.Started.Compare(b.Started) })
	for _, a := range actions {
		w.emit(Event{Action: &a})
	}
	for _, q := range questions {
		w.emit(Event{Question: &q})
	}
}

// event applies a serve's event to its view and passes it on.
func (w *Watcher) event(f *followed, ev *Event) {
	id := string(f.id)
	w.mu.Lock()
	switch {
	case ev.Missed > 0:
		f.missed += ev.Missed // passed on once the snapshot is in
		w.mu.Unlock()
		return
	case ev.Serve != nil:
		ev.Serve.ID = id
		f.info = *ev.Serve
	case ev.Action != nil:
		ev.Action.Serve = id
		f.actions[ev.Action.Handle] = *ev.Action
		if len(f.actions) > maxActionsPerServe {
			forgetOldest(f.actions)
		}
	case ev.Output != nil:
		ev.Output.Serve = id
	case ev.Question != nil:
		ev.Question.Serve = id
		f.questions[ev.Question.ID] = *ev.Question
	case ev.QuestionGone != "":
		delete(f.questions, ev.QuestionGone)
	case ev.ServeGone != "":
		w.mu.Unlock()
		return // a serve speaks for itself only
	}
	ready := f.ready
	w.mu.Unlock()
	if ready {
		w.emit(*ev)
	}
}

// forgetOldest drops the oldest finished action, or the oldest.
func forgetOldest(actions map[string]Action) {
	var old *Action
	for _, a := range actions {
		if old == nil || (a.Ended.IsZero() == old.Ended.IsZero() && a.Started.Before(old.Started)) || (!a.Ended.IsZero() && old.Ended.IsZero()) {
			old = &a
		}
	}
	delete(actions, old.Handle)
}

// emit passes ev on, or counts it missed when the reader is behind; a
// Missed goes before the next event delivered.
func (w *Watcher) emit(ev Event) {
	w.sendMu.Lock()
	defer w.sendMu.Unlock()
	if w.missed > 0 {
		select {
		case w.events <- Event{Missed: w.missed}:
			w.missed = 0
		default:
			w.missed++
			return
		}
	}
	select {
	case w.events <- ev:
	default:
		w.missed++
	}
}

// Snapshot returns the current view.
func (w *Watcher) Snapshot() Snapshot {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Snapshot{Serves: []Serve{}, Actions: []Action{}, Questions: []Question{}}
	for _, f := range w.serves {
		if !f.ready {
			continue
		}
		s.Serves = append(s.Serves, f.info)
		for _, a := range f.actions {
			s.Actions = append(s.Actions, a)
		}
		for _, q := range f.questions {
			s.Questions = append(s.Questions, q)
		}
	}
	slices.SortFunc(s.Serves, func(a, b Serve) int { return cmp.Or(a.Started.Compare(b.Started), cmp.Compare(a.ID, b.ID)) })
	slices.SortFunc(s.Actions, func(a, b Action) int { return cmp.Or(b.Started.Compare(a.Started), cmp.Compare(a.Handle, b.Handle)) })
	slices.SortFunc(s.Questions, func(a, b Question) int { return cmp.Or(a.AskedAt.Compare(b.AskedAt), cmp.Compare(a.ID, b.ID)) })
	return s
}

// SetPage tells every serve, now and when it connects, the address of
// the console's page (http://LOOPBACK-IP:PORT/): a serve hands a client
// that can open addresses (MCP URL-mode elicitation) the place of its
// question there. The address carries no credential.
func (w *Watcher) SetPage(url string) {
	w.mu.Lock()
	w.page = url
	serves := slices.Collect(maps.Values(w.serves))
	w.mu.Unlock()
	for _, f := range serves {
		w.tellPage(f, url)
	}
}

// tellPage sends f the console's page without waiting for the reply,
// which follow drops: a serve that refuses it only hands no page out.
func (w *Watcher) tellPage(f *followed, url string) {
	_ = f.send(request{ID: f.nextID.Add(1), Page: &pageRequest{URL: url}})
}

// send writes req to the serve, waiting at most requestWait.
func (f *followed) send(req request) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	f.wmu.Lock()
	defer f.wmu.Unlock()
	_ = f.c.SetWriteDeadline(time.Now().Add(requestWait))
	_, err = f.c.Write(append(b, '\n'))
	return err
}

// Stop cancels a running action of a serve with cancel_action's verified
// remote stop, and returns once it is known.
func (w *Watcher) Stop(ctx context.Context, serve, handle string) (StopResult, error) {
	rep, err := w.request(ctx, serve, request{Stop: &stopRequest{Handle: handle}})
	if err != nil {
		return StopResult{}, err
	}
	if rep.Stop == nil {
		return StopResult{}, fmt.Errorf("serve %s sent no stop result", serve)
	}
	return *rep.Stop, nil
}

// Answer answers a waiting question; an error says it was no longer
// waiting (answered elsewhere, expired) or the serve is gone.
func (w *Watcher) Answer(ctx context.Context, serve, question string, a Answer) error {
	_, err := w.request(ctx, serve, request{Answer: &answerRequest{Question: question, Answer: a}})
	return err
}

// request sends req to serve and waits for its reply.
func (w *Watcher) request(ctx context.Context, serve string, req request) (reply, error) {
	w.mu.Lock()
	f := w.serves[serve]
	if f == nil || !f.ready {
		w.mu.Unlock()
		return reply{}, ErrServeGone
	}
	req.ID = f.nextID.Add(1)
	ch := make(chan reply, 1)
	f.replies[req.ID] = ch
	w.mu.Unlock()
	forget := func() {
		w.mu.Lock()
		delete(f.replies, req.ID)
		w.mu.Unlock()
	}
	if err := f.send(req); err != nil {
		forget()
		return reply{}, fmt.Errorf("%w: %v", ErrServeGone, err)
	}
	select {
	case rep := <-ch:
		if rep.Error != "" {
			return rep, &RequestError{Serve: serve, Reason: rep.Error}
		}
		return rep, nil
	case <-f.done:
		return reply{}, ErrServeGone
	case <-ctx.Done():
		forget()
		return reply{}, context.Cause(ctx)
	}
}

// RequestError is a serve's refusal of a Stop or an Answer: an action or
// question it does not know, or an answer the question does not offer.
type RequestError struct {
	Serve  string
	Reason string
}

func (e *RequestError) Error() string { return fmt.Sprintf("serve %s: %s", e.Serve, e.Reason) }
