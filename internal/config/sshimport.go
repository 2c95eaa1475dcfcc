package config

import (
	"fmt"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"slices"
	"strings"

	sshconfig "github.com/kevinburke/ssh_config"
)

// SSHConfigHost is a Host entry of an ssh config that can become a target
// of the same name.
type SSHConfigHost struct {
	// Name is a literal name of the entry's Host line, a valid target
	// name.
	Name string
	// IdentityFiles are the entry's IdentityFile paths in order, "~" and
	// %d, %u, %h, %r, %% expanded; those with other tokens are left out.
	IdentityFiles []string
}

// SSHConfigHosts lists the Host names of the ssh config at file, and of
// the files it Includes, that match the glob pattern (path.Match), in the
// order they appear. A name with a wildcard or a "!" is no host; a name
// that is no valid target name is reported in skipped, with why.
func SSHConfigHosts(file, pattern string) (hosts []SSHConfigHost, skipped []string, err error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, nil, fmt.Errorf("-hosts %q: %w", pattern, err)
	}
	sc, err := readSSHConfig(file)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	if err := hostNames(sc.cfg, 0, &names); err != nil {
		return nil, nil, err
	}
	home, _ := os.UserHomeDir()
	for _, name := range names {
		if ok, _ := path.Match(pattern, name); !ok {
			continue
		}
		if err := checkTargetName(name); err != nil {
			skipped = append(skipped, fmt.Sprintf("Host %s: %v", name, err))
			continue
		}
		h := SSHConfigHost{Name: name}
		files, _ := sc.cfg.GetAll(name, "IdentityFile")
		hostName, _ := sc.cfg.Get(name, "HostName")
		if hostName == "" {
			hostName = name
		}
		remoteUser, _ := sc.cfg.Get(name, "User")
		if remoteUser == "" {
			remoteUser = localUser()
		}
		tokens := map[byte]string{'d': home, 'u': localUser(), 'h': hostName, 'r': remoteUser}
		for _, f := range files {
			if f == "none" {
				continue
			}
			p, err := expandTokens(expandHome(f), "IdentityFile", tokens)
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("Host %s: %v", name, err))
				continue
			}
			if !slices.Contains(h.IdentityFiles, p) {
				h.IdentityFiles = append(h.IdentityFiles, p)
			}
		}
		hosts = append(hosts, h)
	}
	return hosts, skipped, nil
}

// hostNames appends the literal names of cfg's Host lines, and of the
// files its Includes name, to names, once each. The parser keeps the
// files it included to itself, so Include lines are read again here, with
// its rules: an absolute path, "~/" for the account's home directory, else
// relative to its ~/.ssh; globs; at most 5 deep.
func hostNames(cfg *sshconfig.Config, depth int, names *[]string) error {
	if depth > 5 {
		return fmt.Errorf("Include nested more than 5 deep (an Include loop?)")
	}
	for _, h := range cfg.Hosts {
		if !strings.HasPrefix(strings.TrimSpace(h.String()), "Match") {
			for _, p := range h.Patterns {
				s := p.String()
				if !strings.ContainsAny(s, "*?!") && !slices.Contains(*names, s) {
					*names = append(*names, s)
				}
			}
		}
		for _, n := range h.Nodes {
			inc, ok := n.(*sshconfig.Include)
			if !ok {
				continue
			}
			for _, file := range includeFiles(inc) {
				sub, err := readSSHConfig(file)
				if err != nil {
					return err
				}
				if err := hostNames(sub.cfg, depth+1, names); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// includeFiles are the files an Include line names, as the parser finds
// them.
func includeFiles(inc *sshconfig.Include) []string {
	home := os.Getenv("HOME")
	if u, err := user.Current(); err == nil {
		home = u.HomeDir // the parser's choice, not $HOME
	}
	fields := strings.Fields(inc.String())[1:] // "Include a b #comment"
	if len(fields) > 0 && fields[0] == "=" {
		fields = fields[1:]
	}
	var files []string
	for _, d := range fields {
		if strings.HasPrefix(d, "#") {
			break
		}
		switch {
		case filepath.IsAbs(d):
		case strings.HasPrefix(d, "~/"):
			d = filepath.Join(home, d[2:])
		default:
			d = filepath.Join(home, ".ssh", d)
		}
		matches, _ := filepath.Glob(d)
		for _, m := range matches {
			if !slices.Contains(files, m) {
				files = append(files, m)
			}
		}
	}
	return files
}
