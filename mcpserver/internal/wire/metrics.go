package wire

import (
	"sync/atomic"
	"time"
)

// Metrics counts the traffic of one stdio transport. Names are from the
// point of view of the process that owns the counters: "stdin" is the stream
// it reads, "stdout" the stream it writes. All fields are safe for
// concurrent use.
type Metrics struct {
	StdinBytes       atomic.Int64
	StdoutBytes      atomic.Int64
	FramesIn         atomic.Int64
	FramesOut        atomic.Int64
	LargestFrameIn   atomic.Int64
	OversizeFrames   atomic.Int64
	ParseErrors      atomic.Int64
	CancelsReceived  atomic.Int64
	ResponsesDropped atomic.Int64
	// ArgumentsLifted counts the large string arguments the server took
	// out of their frames before decoding them (mcpserver's lift).
	ArgumentsLifted atomic.Int64
	stdoutBlocked   atomic.Int64 // nanoseconds spent inside writes to stdout
}

// Snapshot is a copy of Metrics at one moment, in the JSON shape the
// health tool reports.
type Snapshot struct {
	StdinBytes       int64 `json:"stdin_bytes"`
	StdoutBytes      int64 `json:"stdout_bytes"`
	FramesIn         int64 `json:"frames_in"`
	FramesOut        int64 `json:"frames_out"`
	LargestFrameIn   int64 `json:"largest_frame_in"`
	OversizeFrames   int64 `json:"oversize_frames"`
	ParseErrors      int64 `json:"parse_errors"`
	CancelsReceived  int64 `json:"cancels_received"`
	ResponsesDropped int64 `json:"responses_dropped"`
	ArgumentsLifted  int64 `json:"arguments_lifted"`
	StdoutBlockedMS  int64 `json:"stdout_blocked_ms"`
}

// Snapshot returns the current values.
func (m *Metrics) Snapshot() Snapshot {
	return Snapshot{
		StdinBytes:       m.StdinBytes.Load(),
		StdoutBytes:      m.StdoutBytes.Load(),
		FramesIn:         m.FramesIn.Load(),
		FramesOut:        m.FramesOut.Load(),
		LargestFrameIn:   m.LargestFrameIn.Load(),
		OversizeFrames:   m.OversizeFrames.Load(),
		ParseErrors:      m.ParseErrors.Load(),
		CancelsReceived:  m.CancelsReceived.Load(),
		ResponsesDropped: m.ResponsesDropped.Load(),
		ArgumentsLifted:  m.ArgumentsLifted.Load(),
		StdoutBlockedMS:  time.Duration(m.stdoutBlocked.Load()).Milliseconds(),
	}
}

// NoteWrite records one write to stdout of n bytes that took d (the time
// the writer was blocked in it); complete says whether a whole frame went out.
func (m *Metrics) NoteWrite(n int, d time.Duration, complete bool) {
	if complete {
		m.FramesOut.Add(1)
	}
	m.StdoutBytes.Add(int64(n))
	m.stdoutBlocked.Add(int64(d))
}

func (m *Metrics) noteFrameIn(size int64) {
	m.FramesIn.Add(1)
	for {
		cur := m.LargestFrameIn.Load()
		if size <= cur || m.LargestFrameIn.CompareAndSwap(cur, size) {
			return
		}
	}
}
