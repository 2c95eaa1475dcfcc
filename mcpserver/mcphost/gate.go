package mcphost

import (
	"io"
	"sync"
)

// gate holds readers back while paused.
type gate struct {
	mu      sync.Mutex
	paused  bool
	resumed chan struct{}
}

func (g *gate) pause() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.paused {
		g.paused = true
		g.resumed = make(chan struct{})
	}
}

func (g *gate) resume() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused {
		g.paused = false
		close(g.resumed)
	}
}

func (g *gate) wait() {
	g.mu.Lock()
	paused, resumed := g.paused, g.resumed
	g.mu.Unlock()
	if paused {
		<-resumed
	}
}

type gatedReader struct {
	g *gate
	r io.Reader
}

func (gr gatedReader) Read(p []byte) (int, error) {
	gr.g.wait()
	return gr.r.Read(p)
}
