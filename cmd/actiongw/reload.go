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

// watchConfig reloads gw's configuration from path on SIGHUP, and when the
// file has changed and then stayed the same for one poll (so that a file
// still being written is not read half-way). It runs until stop is
// called, which waits for it.
func (c *cli) watchConfig(ctx context.Context, path string, gw *gateway.Gateway, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		reload := func(why string) {
			log.Info("reloading the configuration", "path", path, "why", why)
			cfg, err := c.loadConfig(path)
			gw.Reload(ctx, cfg, err)
		}
		loaded := stat(path) // what the config in effect was read from
		seen := loaded
		tick := time.NewTicker(configPoll)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				loaded = stat(path)
				seen = loaded
				reload("SIGHUP")
			case <-tick.C:
				now := stat(path)
				if now == seen && now != loaded {
					loaded = now
					reload("the file changed")
				}
				seen = now
			}
		}
	})
	return func() {
		signal.Stop(hup)
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
