package config

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Load reads, decodes and validates the file at path. A file that does not
// load gives an *Error naming path and every problem found; a file that
// cannot be read gives the error of os.ReadFile.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data)
	var cerr *Error
	if errors.As(err, &cerr) {
		cerr.Path = path
	}
	return cfg, err
}

// Parse decodes TOML strictly over [Default], fills the defaults of every
// target and validates the result. Every problem is a *FieldError with the
// key and, where the text shows it, the line; Parse returns them together
// as an *Error.
func Parse(data []byte) (*Config, error) {
	cfg := Default()
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(cfg)
	if err != nil {
		return nil, &Error{Problems: []*FieldError{decodeError(err)}}
	}
	var problems []*FieldError
	for _, k := range md.Undecoded() {
		problems = append(problems, undecodedError(data, k))
	}
	problems = append(problems, unitlessDurations(data, md)...)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	cfg.setTargetDefaults()
	set := func(target, key string) bool { return md.IsDefined("ssh", target, key) }
	if problems := cfg.resolveSSHConfig(set); len(problems) > 0 {
		for _, p := range problems {
			p.Line = fieldLine(data, p.Field)
		}
		return nil, &Error{Problems: problems}
	}
	if err := cfg.Validate(); err != nil {
		e := &Error{}
		for _, err := range err.(interface{ Unwrap() []error }).Unwrap() {
			var fe *FieldError
			if !errors.As(err, &fe) {
				fe = &FieldError{Reason: err.Error()}
			}
			fe.Line = fieldLine(data, fe.Field)
			e.Problems = append(e.Problems, fe)
		}
		return nil, e
	}
	return cfg, nil
}

// Error is a configuration that does not load: every problem found, each
// naming its key and line where known.
type Error struct {
	// Path is the file; empty when the text did not come from one.
	Path     string
	Problems []*FieldError
}

// configHelp ends every config error: what to read to fix it.
const configHelp = "every option is described in config.example.toml and in docs/configuration.md; after editing, run: actiongw check"

// Error gives one line per problem, "path:line: key: reason", as compilers
// do so that editors can jump to it, then configHelp.
func (e *Error) Error() string {
	var b strings.Builder
	for _, p := range e.Problems {
		if e.Path != "" {
			b.WriteString(e.Path)
			if p.Line > 0 {
				fmt.Fprintf(&b, ":%d", p.Line)
			}
			b.WriteString(": ")
		} else if p.Line > 0 {
			fmt.Fprintf(&b, "line %d: ", p.Line)
		}
		b.WriteString(p.where())
		b.WriteString("\n")
	}
	b.WriteString(configHelp)
	return b.String()
}

// Unwrap gives the problems, for errors.As(err, &fieldErr).
func (e *Error) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p
	}
	return errs
}

// typeError is how BurntSushi/toml words a value of the wrong type; it has
// no error type for it.
var typeError = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// decodeError turns a decoding error into a *FieldError with the line and,
// when the error is about a value rather than the syntax, the key.
func decodeError(err error) *FieldError {
	var perr toml.ParseError
	if errors.As(err, &perr) {
		if d, ok := strings.CutPrefix(perr.Message, "invalid duration: "); ok {
			// The decoder knows the key only as the last one it parsed,
			// which for a value is the value's own.
			return &FieldError{Field: perr.LastKey, Line: perr.Position.Line, Reason: durationReason(strings.Trim(d, `"`))}
		}
		return &FieldError{Line: perr.Position.Line, Reason: perr.Message}
	}
	if m := typeError.FindStringSubmatch(err.Error()); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &FieldError{Field: m[2], Line: line, Reason: m[3]}
	}
	return &FieldError{Reason: err.Error()}
}

// durationReason says what is wrong with a duration written as v and how to
// write it, with v corrected when it is a bare number.
func durationReason(v string) string {
	fix := `"60s"`
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		fix = strconv.Quote(v + "s")
	}
	return fmt.Sprintf("invalid duration %q: a duration needs a unit, e.g. %s (units: ms, s, m, h; combined as \"1m30s\")", v, fix)
}

// unitlessDurations finds durations written as bare integers, which the
// decoder takes as nanoseconds: `timeout = 60` would be 60ns.
func unitlessDurations(data []byte, md toml.MetaData) []*FieldError {
	var problems []*FieldError
	for _, k := range md.Keys() {
		var table any
		switch {
		case len(k) == 2 && k[0] == "server":
			table = Server{}
		case len(k) == 3 && k[0] == "ssh":
			table = SSHTarget{}
		case len(k) == 3 && k[0] == "http":
			table = HTTPEndpoint{}
		default:
			continue
		}
		if !isDurationKey(table, k[len(k)-1]) || md.Type(k...) != "Integer" {
			continue
		}
		v := "60"
		if line := keyLine(data, k); line > 0 {
			if m := regexp.MustCompile(`=\s*([0-9_]+)`).FindSubmatch(lineText(data, line)); m != nil {
				v = string(m[1])
			}
		}
		problems = append(problems, &FieldError{Field: k.String(), Line: keyLine(data, k), Reason: durationReason(v) + ", in quotes"})
	}
	return problems
}

func isDurationKey(table any, key string) bool {
	rt := reflect.TypeOf(table)
	for i := range rt.NumField() {
		if f := rt.Field(i); f.Tag.Get("toml") == key {
			return f.Type == reflect.TypeFor[time.Duration]()
		}
	}
	return false
}

// lineText returns line n (1-based) of data.
func lineText(data []byte, n int) []byte {
	lines := bytes.SplitN(data, []byte("\n"), n+1)
	if n > len(lines) {
		return nil
	}
	return lines[n-1]
}

// inlineCredentialKeys are keys people write when they mean to paste a
// credential; each gets a pointer to the keyring instead of "unknown key".
var inlineCredentialKeys = map[string]string{
	"password": "password_secret", "passphrase": "passphrase_secret",
	"token": "token_secret", "key": "key_secret", "private_key": "key_secret",
	"secret": "token_secret", "api_key": "token_secret",
}

func undecodedError(data []byte, k toml.Key) *FieldError {
	fe := &FieldError{Field: k.String(), Line: keyLine(data, k), Reason: "unknown key"}
	if field, ok := inlineCredentialKeys[strings.ToLower(k[len(k)-1])]; ok {
		fe.Reason = fmt.Sprintf("credentials do not belong in the config file; store the value with `actiongw secret set NAME` and write %s = \"NAME\"", field)
	}
	return fe
}

// fieldLine finds the line of a FieldError's field: "server.key",
// "ssh.NAME[.key[[i]]]" or "http.NAME[.key[[i]]]", NAME possibly with dots.
// It is the key's line, else the line of the target's table header.
func fieldLine(data []byte, field string) int {
	kind, rest, ok := strings.Cut(field, ".")
	if !ok {
		return 0
	}
	if i := strings.IndexByte(rest, '['); i >= 0 {
		rest = rest[:i]
	}
	if kind == "server" || kind == "audit" {
		return keyLine(data, toml.Key{kind, rest})
	}
	if name, key, ok := cutLast(rest, "."); ok {
		if line := keyLine(data, toml.Key{kind, name, key}); line > 0 {
			return line
		}
	}
	return headerLine(data, kind+"."+rest)
}

func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// headerLine finds the line of the header [table].
func headerLine(data []byte, table string) int {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		if h, ok := tableHeader(sc.Text()); ok && h == table {
			return n
		}
	}
	return 0
}

// tableHeader returns the table name of a "[table]" line, quotes removed.
func tableHeader(line string) (string, bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "[") {
		return "", false
	}
	h := strings.Trim(line, "[] ")
	if i := strings.Index(h, "]"); i >= 0 {
		h = h[:i]
	}
	return strings.ReplaceAll(h, `"`, ""), true
}

// keyLine finds the line of key k: the first assignment of its last part
// after the header of its table. BurntSushi/toml keeps key positions
// private, so this reads the text.
func keyLine(data []byte, k toml.Key) int {
	table := strings.Join(k[:len(k)-1], ".")
	assign := regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(k[len(k)-1]) + `"?\s*=`)
	inTable := table == ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if h, ok := tableHeader(line); ok {
			inTable = h == table
			continue
		}
		if inTable && assign.MatchString(line) {
			return n
		}
	}
	return 0
}

// FieldError says which field of the config is wrong and why.
type FieldError struct {
	// Field is the key path, e.g. "ssh.web1.port"; empty for a syntax
	// error, which belongs to a line rather than a key.
	Field string
	// Line is the line of the file (from 1); zero when unknown, as for a
	// Config built in code.
	Line   int
	Reason string
}

func (e *FieldError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.where())
	}
	return e.where()
}

// where is the key and the reason.
func (e *FieldError) where() string {
	if e.Field == "" {
		return e.Reason
	}
	return e.Field + ": " + e.Reason
}
