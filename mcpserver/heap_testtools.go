//go:build testtools

package mcpserver

import (
	"context"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The heap and cpu_profile tools exist only in builds with the testtools
// tag: they let the memory tests see serve's heap after a collection, and
// the benchmarks profile serve, from outside the process.
func init() { toolSets = append(toolSets, addHeapTool, addCPUProfileTool) }

type heapIn struct {
	Profile string `json:"profile,omitempty" jsonschema:"write a heap profile (pprof) to this path after the collection"`
}

// heapOut is the runtime's memory statistics right after a collection.
type heapOut struct {
	HeapInuse   uint64 `json:"heap_inuse"`
	HeapAlloc   uint64 `json:"heap_alloc"`
	HeapObjects uint64 `json:"heap_objects"`
	NumGC       uint32 `json:"num_gc"`
	Goroutines  int    `json:"goroutines"`
}

func addHeapTool(s *mcp.Server, _ *toolEnv) {
	addTool(s, &mcp.Tool{
		Name:        "heap",
		Description: "Test tool: collect garbage, then return the heap's statistics, optionally writing a heap profile.",
	}, heap)
}

func heap(_ context.Context, _ *mcp.CallToolRequest, in heapIn) (*mcp.CallToolResult, heapOut, error) {
	// NumGC is read first, so that the tool's own collections are not
	// counted as the load's.
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	runtime.GC()
	runtime.GC() // the first one's finalizers free more
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	out := heapOut{HeapInuse: m.HeapInuse, HeapAlloc: m.HeapAlloc, HeapObjects: m.HeapObjects,
		NumGC: before.NumGC, Goroutines: runtime.NumGoroutine()}
	if in.Profile != "" {
		f, err := os.Create(in.Profile)
		if err != nil {
			return nil, heapOut{}, err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, heapOut{}, err
		}
	}
	return textResult("heap in use %d bytes, %d objects, after %d collections", out.HeapInuse, out.HeapObjects, out.NumGC), out, nil
}

type cpuProfileIn struct {
	Path string `json:"path,omitempty" jsonschema:"start a CPU profile (pprof) into this file; empty stops the one running"`
}

type cpuProfileOut struct {
	Running bool `json:"running"` // a profile is being written
}

func addCPUProfileTool(s *mcp.Server, _ *toolEnv) {
	addTool(s, &mcp.Tool{
		Name:        "cpu_profile",
		Description: "Test tool: start a CPU profile into a file, or stop the one running.",
	}, cpuProfile)
}

// cpuProfileFile is the file of the CPU profile running, if any.
var cpuProfileFile struct {
	sync.Mutex
	f *os.File
}

func cpuProfile(_ context.Context, _ *mcp.CallToolRequest, in cpuProfileIn) (*mcp.CallToolResult, cpuProfileOut, error) {
	p := &cpuProfileFile
	p.Lock()
	defer p.Unlock()
	if p.f != nil {
		pprof.StopCPUProfile()
		err := p.f.Close()
		p.f = nil
		if err != nil {
			return nil, cpuProfileOut{}, err
		}
	}
	if in.Path == "" {
		return textResult("stopped"), cpuProfileOut{}, nil
	}
	f, err := os.Create(in.Path)
	if err != nil {
		return nil, cpuProfileOut{}, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, cpuProfileOut{}, err
	}
	p.f = f
	return textResult("started"), cpuProfileOut{Running: true}, nil
}
