package console

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/actiongw/actiongw/internal/audit"
)

// maxAuditRecords bounds what one audit request reads: the last records
// of the log, across its rotated files.
const maxAuditRecords = 20000

// entry is one action of the audit log: its intent and outcome joined by
// handle, or a record of the chain's own (key, seal, repair).
type entry struct {
	Handle  string        `json:"handle"`
	Kind    audit.Kind    `json:"kind"`
	Time    time.Time     `json:"time"`
	Tool    string        `json:"tool"`
	Target  string        `json:"target"`
	Status  string        `json:"status"`
	Intent  *audit.Record `json:"intent,omitempty"`
	Outcome *audit.Record `json:"outcome,omitempty"`
	Other   *audit.Record `json:"other,omitempty"`
}

// filter is what the audit view asks for; an empty field matches all.
type filter struct {
	target, tool, status string
	since, until         time.Time
}

func parseFilter(r *http.Request) (filter, error) {
	q := r.URL.Query()
	f := filter{target: q.Get("target"), tool: q.Get("tool"), status: q.Get("status")}
	for name, t := range map[string]*time.Time{"since": &f.since, "until": &f.until} {
		if v := q.Get(name); v != "" {
			var err error
			if *t, err = time.Parse(time.RFC3339, v); err != nil {
				return f, fmt.Errorf("%s: want a time as RFC 3339", name)
			}
		}
	}
	return f, nil
}

func (f filter) match(e *entry) bool {
	return (f.target == "" || e.Target == f.target) && (f.tool == "" || e.Tool == f.tool) &&
		(f.status == "" || e.Status == f.status) &&
		(f.since.IsZero() || !e.Time.Before(f.since)) && (f.until.IsZero() || !e.Time.After(f.until))
}

// auditLog is what the audit view shows: every entry, oldest first, the
// values to filter by, and the lines that could not be read.
type auditLog struct {
	Entries    []*entry `json:"entries"`
	Targets    []string `json:"targets"`
	Tools      []string `json:"tools"`
	Statuses   []string `json:"statuses"`
	Unreadable []string `json:"unreadable"`
	// Limited says the log holds more than the last maxAuditRecords
	// records read.
	Limited bool `json:"limited"`
}

// readAudit reads the last records of the state directory's audit log
// and joins intents and outcomes by handle.
func (s *Server) readAudit(r *http.Request) (*auditLog, error) {
	l := &auditLog{Entries: []*entry{}, Unreadable: []string{}}
	byHandle := map[string]*entry{}
	n := 0
	err := audit.Tail(r.Context(), audit.Path(s.opts.StateDir), maxAuditRecords, false, func(rec *audit.Record, err error) error {
		n++
		if err != nil {
			if len(l.Unreadable) < 100 {
				l.Unreadable = append(l.Unreadable, err.Error())
			}
			return nil
		}
		switch rec.Kind {
		case audit.KindIntent, audit.KindOutcome:
		default:
			l.Entries = append(l.Entries, &entry{Kind: rec.Kind, Time: rec.Time, Other: rec})
			return nil
		}
		e := byHandle[rec.Handle]
		if e == nil || rec.Handle == "" {
			e = &entry{Handle: rec.Handle, Kind: audit.KindIntent, Time: rec.Time, Tool: rec.Tool, Target: rec.Target, Status: "running"}
			byHandle[rec.Handle] = e
			l.Entries = append(l.Entries, e)
		}
		if rec.Kind == audit.KindIntent {
			e.Intent = rec
		} else {
			e.Outcome, e.Status = rec, rec.Status
			if e.Intent == nil { // its intent is before the records read
				e.Time = rec.Time.Add(-time.Duration(rec.DurationMS) * time.Millisecond)
			}
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) { // no serve has run yet
		err = nil
	}
	if err != nil {
		return nil, err
	}
	l.Limited = n >= maxAuditRecords
	values := func(of func(*entry) string) []string {
		var vs []string
		for _, e := range l.Entries {
			if v := of(e); v != "" {
				vs = append(vs, v)
			}
		}
		slices.Sort(vs)
		return append([]string{}, slices.Compact(vs)...)
	}
	l.Targets = values(func(e *entry) string { return e.Target })
	l.Tools = values(func(e *entry) string { return e.Tool })
	l.Statuses = values(func(e *entry) string { return e.Status })
	slices.SortStableFunc(l.Entries, func(a, b *entry) int { return a.Time.Compare(b.Time) })
	return l, nil
}

func (s *Server) filtered(w http.ResponseWriter, r *http.Request) (*auditLog, bool) {
	f, err := parseFilter(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return nil, false
	}
	l, err := s.readAudit(r)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "console: reading the audit log: " + err.Error()})
		return nil, false
	}
	l.Entries = slices.DeleteFunc(l.Entries, func(e *entry) bool { return !f.match(e) })
	return l, true
}

// auditView answers the filtered entries, newest first, at most limit
// (default 500) of them.
func (s *Server) auditView(w http.ResponseWriter, r *http.Request) {
	l, ok := s.filtered(w, r)
	if !ok {
		return
	}
	limit, err := strconv.Atoi(cmp.Or(r.URL.Query().Get("limit"), "500"))
	if err != nil || limit < 1 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "limit: want a positive number"})
		return
	}
	slices.Reverse(l.Entries)
	total := len(l.Entries)
	l.Entries = l.Entries[:min(limit, total)]
	writeJSON(w, http.StatusOK, struct {
		*auditLog
		Total int `json:"total"`
	}{l, total})
}

// auditDownload answers every record of the filtered entries as JSON
// Lines, in the log's order.
func (s *Server) auditDownload(w http.ResponseWriter, r *http.Request) {
	l, ok := s.filtered(w, r)
	if !ok {
		return
	}
	var recs []*audit.Record
	for _, e := range l.Entries {
		for _, rec := range []*audit.Record{e.Intent, e.Outcome, e.Other} {
			if rec != nil {
				recs = append(recs, rec)
			}
		}
	}
	slices.SortStableFunc(recs, func(a, b *audit.Record) int { return cmp.Compare(a.Seq, b.Seq) })
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Content-Disposition", `attachment; filename="actiongw-audit.jsonl"`)
	enc := json.NewEncoder(w)
	for _, rec := range recs {
		if err := enc.Encode(rec); err != nil {
			return
		}
	}
}

// chainState is the audit log's verification as `actiongw audit verify`
// says it.
type chainState struct {
	Verified bool   `json:"verified"`
	Text     string `json:"text"`
	Note     string `json:"note,omitempty"` // what of the keyring could not be read
	// Damage is where the chain broke, with the way out in Text.
	Damage *audit.DamagedError `json:"damage,omitempty"`
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	var opts audit.VerifyOptions
	var st chainState
	if s.opts.VerifyOptions != nil {
		opts, st.Note = s.opts.VerifyOptions(r.Context())
	}
	path := audit.Path(s.opts.StateDir)
	rep, err := audit.VerifyWith(r.Context(), path, opts)
	var damage *audit.DamagedError
	switch {
	case errors.As(err, &damage):
		st.Damage = damage
		st.Text = err.Error()
		if damage.LastSeq > 0 {
			st.Text = fmt.Sprintf("%s: good up to record %d; then: %s", path, damage.LastSeq, err)
		}
	case err != nil:
		st.Text = err.Error()
	default:
		st.Verified, st.Text = true, rep.String()
	}
	writeJSON(w, http.StatusOK, st)
}
