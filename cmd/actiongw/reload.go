package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/actiongw/actiongw/gateway"
)

// configPoll is how often serve looks at its config file for a change.
// Polling sees every way an editor saves (writing in place, or renaming a
// new file over the old) on every platform, for one stat a second.
const configPoll = time.Second

// configSource is the config file serve reads, watched from before its
// first load.
type configSource struct {
	path   string
	hup    chan os.Signal
	loaded fileState // what the config in effect was read from
}

// watchFrom starts taking SIGHUP for path (so that one arriving before the
// watch runs is kept, not fatal) and notes the file as it is before the
// first load.
func watchFrom(path string) *configSource {
	src := &configSource{path: path, hup: make(chan os.Signal, 1)}
	signal.Notify(src.hup, syscall.SIGHUP)
	src.loaded = stat(path)
	return src
}

// stop stops taking SIGHUP.
func (src *configSource) stop() { signal.Stop(src.hup) }

// watchConfig reloads gw's configuration from src on SIGHUP, and when the
// file has changed and then stayed the same for one poll (so that a file
// still being written is not read half-way). It runs until stop is
// called, which waits for it.
func (c *cli) watchConfig(ctx context.Context, src *configSource, gw *gateway.Gateway, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		reload := func(why string) {
			log.Info("reloading the configuration", "path", src.path, "why", why)
			cfg, err := c.loadConfig(src.path)
			gw.Reload(ctx, cfg, err)
		}
		loaded := src.loaded
		seen := stat(src.path)
		tick := time.NewTicker(configPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-src.hup:
				loaded = stat(src.path)
				seen = loaded
				reload("SIGHUP")
			case <-tick.C:
				now := stat(src.path)
				if now == seen && now != loaded {
					loaded = now
					reload("the file changed")
				}
				seen = now
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// fileState is what tells one version of a file from another.
type fileState struct {
	exists  bool
	size    int64
	modTime int64 // nanoseconds since the epoch
	ino     uint64
}

func stat(path string) fileState {
	fi, err := os.Stat(path)
	if err != nil {
		return fileState{}
	}
	return fileState{exists: true, size: fi.Size(), modTime: fi.ModTime().UnixNano(), ino: inode(fi)}
}
