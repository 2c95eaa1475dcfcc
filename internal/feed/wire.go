package feed

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"net/url"
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

// request is one frame a console sends: a stop, an answer, or where its
// page is.
type request struct {
	ID     uint64         `json:"id"`
	Stop   *stopRequest   `json:"stop,omitempty"`
	Answer *answerRequest `json:"answer,omitempty"`
	Page   *pageRequest   `json:"page,omitempty"`
}

// pageRequest tells a serve the address of the console's page, which a
// question's page is (PageURL) for the client to hand the person.
type pageRequest struct {
	URL string `json:"url"`
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
	case countSet(r.Stop != nil, r.Answer != nil, r.Page != nil) != 1:
		return fmt.Errorf("a request is a stop, an answer or a page")
	}
	return nil
}

func countSet(set ...bool) int {
	n := 0
	for _, b := range set {
		if b {
			n++
		}
	}
	return n
}

// checkPage returns what is wrong with a console's page address, if
// anything: it must be the root of a plain http address on a loopback IP
// and port, with nothing else (no user, query or fragment), so that what a
// serve hands a client carries no credential and leads to this machine
// only.
func checkPage(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("the console's page %.64q is no URL", raw)
	}
	ip, perr := netip.ParseAddr(u.Hostname())
	switch {
	case u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Path != "/" || u.Port() == "":
		return fmt.Errorf("the console's page %.64q is not http://LOOPBACK-IP:PORT/", raw)
	case perr != nil || !ip.IsLoopback() || ip.Zone() != "":
		return fmt.Errorf("the console's page %.64q is not on a loopback IP", raw)
	}
	return nil
}

// questionPage is the address of question id's place on the console's
// page: the page with a fragment, which the page's script reads and no
// server is sent.
func questionPage(page, id string) string { return page + "#question=" + id }

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
