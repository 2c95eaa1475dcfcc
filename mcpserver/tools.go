package mcpserver

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actiongw/actiongw/gateway"
	"github.com/actiongw/actiongw/internal/auditexport"
	"github.com/actiongw/actiongw/internal/config"
	"github.com/actiongw/actiongw/mcpserver/internal/wire"
)

// toolEnv is what tool handlers share within one session.
type toolEnv struct {
	cfg     *config.Config
	log     *slog.Logger
	version string
	start   time.Time
	metrics *wire.Metrics
	active  func() int
	gw      *gateway.Gateway
	// approvals is how calls of this server ask a person (approval.go).
	approvals *approvals
	// initialized, if set, is told the client's name (Options.Initialized).
	initialized func(client string)
}

// onInitialized tells env.initialized the client's name.
func (env *toolEnv) onInitialized(_ context.Context, req *mcp.InitializedRequest) {
	if env.initialized == nil {
		return
	}
	name := ""
	if p := req.Session.InitializeParams(); p != nil && p.ClientInfo != nil {
		name = p.ClientInfo.Name
	}
	env.initialized(name)
}

// toolSets add tools to a new server. Each file defining tools appends its
// set in an init function, so a tool set compiled only into some builds
// (see emit_testtools.go) leaves no trace in the others.
var toolSets = []func(*mcp.Server, *toolEnv){addInfoTools}

// textResult is the short text block that goes with a structured result.
func textResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

type listTargetsIn struct{}

type sshTargetInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	User        string `json:"user"`
	Host        string `json:"host"`
	// AllowPaths are where ssh_download and ssh_upload may go; none means
	// no file transfers on this target.
	AllowPaths []string `json:"allow_paths,omitempty"`
	// Approve is "unlisted" or "always" when a person at the client is
	// asked before commands run ("never" is left out).
	Approve string `json:"approve,omitempty"`
	// HostKeyPolicy is "ask" when a person at the client is asked to
	// trust a first-use host key ("strict" is left out).
	HostKeyPolicy string `json:"host_key_policy,omitempty"`
}

type httpEndpointInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	BaseURL     string   `json:"base_url"`
	Methods     []string `json:"methods"`
	// Proxy is the host and port of the HTTP proxy the requests go
	// through, set by configuration only.
	Proxy string `json:"proxy,omitempty"`
	// Via is the SSH target whose server opens the connections to the
	// endpoint (behind a bastion), set by configuration only.
	Via string `json:"via,omitempty"`
	// ApproveMethods are the methods whose requests a person at the
	// client is asked about first.
	ApproveMethods []string `json:"approve_methods,omitempty"`
}

type groupInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Targets     []string `json:"targets"`
}

type listTargetsOut struct {
	SSH  []sshTargetInfo    `json:"ssh"`
	HTTP []httpEndpointInfo `json:"http"`
	// Groups are sets of SSH targets for ssh_exec_many.
	Groups []groupInfo `json:"groups"`
}

type healthIn struct{}

// Health is the structured result of the health tool.
type Health struct {
	Version       string        `json:"version"`
	UptimeMS      int64         `json:"uptime_ms"`
	ActiveActions int           `json:"active_actions"`
	Transport     wire.Snapshot `json:"transport"`
	Approvals     ApprovalStats `json:"approvals"`
	// AuditExport counts the audit records sent to syslog; only when
	// [audit] syslog is set.
	AuditExport *auditexport.Stats `json:"audit_export,omitempty"`
}

func addInfoTools(s *mcp.Server, env *toolEnv) {
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	addTool(s, &mcp.Tool{
		Name:        "list_targets",
		Description: "List the SSH targets and HTTP endpoints configured for this server. Use their names in ssh_exec and http_request.",
		Annotations: readOnly,
	}, env.listTargets)
	addTool(s, &mcp.Tool{
		Name:        "health",
		Description: "Report the server's version, uptime, running actions, stdio transport counters and the questions out to the person.",
		Annotations: readOnly,
	}, env.health)
}

func (env *toolEnv) listTargets(_ context.Context, _ *mcp.CallToolRequest, _ listTargetsIn) (*mcp.CallToolResult, listTargetsOut, error) {
	out := listTargetsOut{SSH: []sshTargetInfo{}, HTTP: []httpEndpointInfo{}, Groups: []groupInfo{}}
	cfg := env.cfg
	if env.gw != nil {
		var err error
		if cfg, err = env.gw.Config(); err != nil {
			r := textResult("%v", err)
			r.IsError = true
			return r, out, nil
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.SSH)) {
		t := cfg.SSH[name]
		if t.JumpOnly {
			continue // nothing runs on it
		}
		info := sshTargetInfo{Name: name, Description: t.Description, User: t.User, Host: t.Host, AllowPaths: t.AllowPaths}
		if t.Approve != config.ApproveNever {
			info.Approve = t.Approve
		}
		if t.HostKeyPolicy == "ask" {
			info.HostKeyPolicy = t.HostKeyPolicy
		}
		out.SSH = append(out.SSH, info)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.HTTP)) {
		e := cfg.HTTP[name]
		out.HTTP = append(out.HTTP, httpEndpointInfo{Name: name, Description: e.Description, BaseURL: publicURL(e.BaseURL), Methods: e.Methods,
			Proxy: e.ProxyAddr(), Via: e.Via, ApproveMethods: e.ApproveMethods})
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Group)) {
		targets, _ := cfg.Targets(cfg.Group[name].Targets) // checked when the config loaded
		out.Groups = append(out.Groups, groupInfo{Name: name, Description: cfg.Group[name].Description, Targets: targets})
	}
	text := fmt.Sprintf("%s and %s are configured; name one in ssh_exec (target) or http_request (endpoint).",
		count(len(out.SSH), "SSH target"), count(len(out.HTTP), "HTTP endpoint"))
	if len(out.Groups) > 0 {
		text += fmt.Sprintf(" %s of SSH targets for ssh_exec_many (group).", count(len(out.Groups), "group"))
	}
	return textResult("%s", text), out, nil
}

// count says n of noun, in the plural unless n is 1.
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (env *toolEnv) health(_ context.Context, _ *mcp.CallToolRequest, _ healthIn) (*mcp.CallToolResult, Health, error) {
	out := Health{
		Version:   env.version,
		UptimeMS:  time.Since(env.start).Milliseconds(),
		Transport: env.metrics.Snapshot(),
		Approvals: env.approvals.stats(),
	}
	if env.active != nil {
		out.ActiveActions = env.active()
	}
	text := fmt.Sprintf("actiongw %s is up (%d ms), %s running.", out.Version, out.UptimeMS, count(out.ActiveActions, "action"))
	if env.gw != nil {
		if st, ok := env.gw.AuditExport(); ok {
			out.AuditExport = &st
			text += " " + exportText(st)
		}
	}
	return textResult("%s", text), out, nil
}

// exportText says how the audit export goes, in health's text.
func exportText(st auditexport.Stats) string {
	state := "connected"
	if !st.Connected {
		state = "not connected"
	}
	text := fmt.Sprintf("Audit export to syslog: %s, %d sent, %d dropped, %d lost, %d queued", state, st.Sent, st.Dropped, st.Lost, st.Queued)
	if st.LastError != "" {
		text += "; the last error was: " + st.LastError
	}
	text += "."
	if st.Dropped+st.Lost > 0 {
		text += " The local audit log has every record; the export's drops and losses are logged on serve's stderr, not in audit.jsonl."
	}
	return text
}

// publicURL drops userinfo and query from a base URL, so a credential
// someone put there by mistake is never shown.
func publicURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}
