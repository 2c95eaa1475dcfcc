package console

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/actiongw/actiongw/internal/feed"
)

// subQueue is how many events wait for one event stream. A tab that
// falls further behind misses the rest and is sent a fresh snapshot.
const subQueue = 256

// hub hands the Watcher's events to every event stream without ever
// waiting on one.
type hub struct {
	mu   sync.Mutex
	subs map[*sub]struct{}
	done chan struct{} // closed when the hub stops
}

// sub is one event stream's bounded queue.
type sub struct {
	ch     chan feed.Event
	lost   chan struct{} // signalled when events were dropped
	missed atomic.Int64
}

func newHub() *hub { return &hub{subs: map[*sub]struct{}{}, done: make(chan struct{})} }

// run hands on events until ctx ends or the Watcher closes them.
func (h *hub) run(ctx context.Context, events <-chan feed.Event) {
	defer close(h.done)
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			h.publish(e)
		}
	}
}

func (h *hub) publish(e feed.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if e.Missed > 0 {
			// The Watcher lost events itself: every stream starts over.
			s.drop(int64(e.Missed))
			continue
		}
		select {
		case s.ch <- e:
		default:
			s.drop(1)
		}
	}
}

func (s *sub) drop(n int64) {
	s.missed.Add(n)
	select {
	case s.lost <- struct{}{}:
	default:
	}
}

func (h *hub) subscribe() *sub {
	s := &sub{ch: make(chan feed.Event, subQueue), lost: make(chan struct{}, 1)}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

func (h *hub) unsubscribe(s *sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// subscribers is how many event streams are open.
func (h *hub) subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// events streams the view as server-sent events: a snapshot first, then
// each event; after events were missed, how many and a fresh snapshot.
// A write that the browser does not take within writeTimeout ends the
// stream (the page's EventSource reconnects and starts over).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	sb := s.hub.subscribe()
	defer s.hub.unsubscribe(sb)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(name string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		if _, err := w.Write([]byte("event: " + name + "\ndata: ")); err != nil {
			return err
		}
		if _, err := w.Write(append(b, "\n\n"...)); err != nil {
			return err
		}
		return nil
	}
	flush := func() error {
		rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
		return rc.Flush()
	}
	// Subscribed before the snapshot is taken: an event in between comes
	// twice, which the page takes as the same, rather than never.
	if err := errors.Join(send("snapshot", snapshotOf(s.opts.Watcher)), flush()); err != nil {
		return
	}
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		var err error
		select {
		case <-r.Context().Done():
			return
		case <-s.hub.done:
			return
		case <-keepalive.C:
			rc.SetWriteDeadline(time.Now().Add(s.writeTimeout))
			_, err = w.Write([]byte(": keepalive\n\n"))
		case <-sb.lost:
			// What is queued is older than the snapshot that follows.
			for len(sb.ch) > 0 {
				<-sb.ch
			}
			err = errors.Join(send("missed", map[string]int64{"missed": sb.missed.Swap(0)}), send("snapshot", snapshotOf(s.opts.Watcher)))
		case e := <-sb.ch:
			err = send("feed", e)
			// What else is queued goes in the same flush.
			for n := len(sb.ch); err == nil && n > 0; n-- {
				err = send("feed", <-sb.ch)
			}
		}
		if err == nil {
			err = flush()
		}
		if err != nil {
			s.log.Debug("console: an event stream ended", "err", err)
			return
		}
	}
}

// snapshotOf is w's snapshot with empty lists, not null.
func snapshotOf(w Watcher) feed.Snapshot {
	snap := w.Snapshot()
	if snap.Serves == nil {
		snap.Serves = []feed.Serve{}
	}
	if snap.Actions == nil {
		snap.Actions = []feed.Action{}
	}
	if snap.Questions == nil {
		snap.Questions = []feed.Question{}
	}
	return snap
}

// session gives the page its CSRF token and what it is looking at.
func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"csrf": s.auth.csrfToken(), "state_dir": s.opts.StateDir})
}

// maxPostBytes bounds a POST's body: its JSON names an action or a
// question.
const maxPostBytes = 4 << 10

// readPost decodes r's JSON body into v, or answers the error and
// returns false.
func readPost(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPostBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "console: bad request: " + err.Error()})
		return false
	}
	return true
}

// stop stops a running action, as cancel_action does.
func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	var req struct{ Serve, Handle string }
	if !readPost(w, r, &req) {
		return
	}
	s.log.Info("console: stop", "serve", req.Serve, "handle", req.Handle)
	res, err := s.opts.Watcher.Stop(r.Context(), req.Serve, req.Handle)
	if err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// answer answers a waiting question.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Serve, Question string
		Answer          feed.Answer
	}
	if !readPost(w, r, &req) {
		return
	}
	switch req.Answer {
	case feed.Approve, feed.ApproveFor, feed.Deny:
	default:
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "console: unknown answer"})
		return
	}
	s.log.Info("console: answer", "serve", req.Serve, "question", req.Question, "answer", req.Answer)
	if err := s.opts.Watcher.Answer(r.Context(), req.Serve, req.Question, req.Answer); err != nil {
		writeJSON(w, http.StatusConflict, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"answer": string(req.Answer)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
