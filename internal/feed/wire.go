package feed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/actiongw/actiongw/internal/owner"
)

// The protocol on a serve's socket is line-delimited JSON, one frame a
// line. The serve sends a snapshot first, then events; it sends a snapshot
// again after it told the console it missed events. The console sends
// requests, each with an id its reply carries.

// maxFrameBytes bounds a frame the serve sends: a snapshot of every
// action it knows with their texts clipped (clipWhat), and the questions.
const maxFrameBytes = 16 << 20

// maxRequestBytes bounds a frame the console sends (a stop or an answer):
// one longer is garbage, and the console is dropped.
const maxRequestBytes = 4 << 10

// maxInFlight bounds a console's requests being carried out at once; one
// more is answered busy at once.
const maxInFlight = 16

// clipWhat bounds an action's What, and a question's text, in a snapshot.
const clipWhat = 4 << 10

// serveFrame is one frame a serve sends; exactly one field is set.
type serveFrame struct {
	Snapshot *Snapshot `json:"snapshot,omitempty"`
	Event    *Event    `json:"event,omitempty"`
	Reply    *reply    `json:"reply,omitempty"`
}

// request is one frame a console sends: a stop or an answer.
type request struct {
	ID     uint64         `json:"id"`
	Stop   *stopRequest   `json:"stop,omitempty"`
	Answer *answerRequest `json:"answer,omitempty"`
}

type stopRequest struct {
	Handle string `json:"handle"`
}

type answerRequest struct {
	Question string `json:"question"`
	Answer   Answer `json:"answer"`
}

// reply is a serve's answer to a request: Stop's result, or Error.
type reply struct {
	ID    uint64      `json:"id"`
	Stop  *StopResult `json:"stop,omitempty"`
	Error string      `json:"error,omitempty"`
}

// check reports what is wrong with a request, if anything.
func (r *request) check() error {
	switch {
	case r.ID == 0:
		return fmt.Errorf("a request needs an id")
	case (r.Stop == nil) == (r.Answer == nil):
		return fmt.Errorf("a request is a stop or an answer")
	}
	return nil
}

func encode(f serveFrame) []byte {
	b, err := json.Marshal(f)
	if err != nil {
		panic(fmt.Sprintf("feed: encoding a frame: %v", err)) // only plain data types
	}
	return append(b, '\n')
}

// Dir is the folder of the serves' sockets in stateDir.
func Dir(stateDir string) string { return filepath.Join(stateDir, "console") }

// sockSuffix ends every socket's name; what precedes it is the serve's
// owner.ID, which is also the Serve's ID.
const sockSuffix = ".sock"

// serveOf returns the owner ID a socket's file name names, or "".
func serveOf(name string) owner.ID {
	id, ok := strings.CutSuffix(name, sockSuffix)
	if !ok || owner.ID(id).Pid() <= 0 {
		return ""
	}
	return owner.ID(id)
}

// privateDir creates dir (mode 0700) or makes it private: only the
// user's own processes may reach a socket in it.
func privateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		return os.Chmod(dir, 0o700)
	}
	return nil
}
