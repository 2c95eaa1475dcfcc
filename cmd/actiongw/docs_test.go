package main

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository, seen from this package's directory.
const repoRoot = "../.."

// docFiles are the pages whose links TestDocLinks checks: README.md,
// ARCHITECTURE.md and every page under docs/, as paths from the root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "ARCHITECTURE.md"}
	for _, p := range pages {
		files = append(files, "docs/"+filepath.Base(p))
	}
	return files
}

// TestDocLinks checks that every relative link in the documentation leads
// to a file that exists and, with a #fragment, to a heading of that file.
func TestDocLinks(t *testing.T) {
	files := docFiles(t, repoRoot)
	if len(files) == 2 {
		t.Fatal("docs/ has no pages; want the reference moved out of README.md there")
	}
	for _, problem := range checkLinks(os.DirFS(repoRoot), files) {
		t.Error(problem)
	}
}

// TestDocPagesLinked checks that the README links every page under docs/
// and that every page links back to the README.
func TestDocPagesLinked(t *testing.T) {
	fsys := os.DirFS(repoRoot)
	readme, err := parseMarkdown(fsys, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	fromReadme := map[string]bool{}
	for _, l := range readme.links {
		if p, _, ok := resolveLink("README.md", l.target); ok {
			fromReadme[p] = true
		}
	}
	for _, page := range docFiles(t, repoRoot)[2:] {
		if !fromReadme[page] {
			t.Errorf("README.md: no link to %s; want one under \"Where to read more\"", page)
		}
		doc, err := parseMarkdown(fsys, page)
		if err != nil {
			t.Fatal(err)
		}
		back := slices.ContainsFunc(doc.links, func(l link) bool {
			p, _, ok := resolveLink(page, l.target)
			return ok && p == "README.md"
		})
		if !back {
			t.Errorf("%s: no link back to ../README.md", page)
		}
	}
}

// githubLink is how the code points a reader at a section of the
// documentation on GitHub: the README's, or a file's on main.
var githubLink = regexp.MustCompile(`https://github\.com/actiongw/actiongw(/blob/main/[A-Za-z0-9_./-]+)?#([A-Za-z0-9_-]+)`)

// TestCodeLinks checks the documentation links the program prints (an
// error that points at a README section, say): each must name a heading
// that exists.
func TestCodeLinks(t *testing.T) {
	fsys := os.DirFS(repoRoot)
	seen := 0
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && name != "." {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		for _, m := range githubLink.FindAllStringSubmatch(string(src), -1) {
			seen++
			file := "README.md"
			if m[1] != "" {
				file = strings.TrimPrefix(m[1], "/blob/main/")
			}
			doc, err := parseMarkdown(fsys, file)
			if err != nil {
				t.Errorf("%s: link %s: %v", name, m[0], err)
				continue
			}
			if !doc.anchors[m[2]] {
				t.Errorf("%s: link %s: no heading #%s in %s", name, m[0], m[2], file)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Fatal("found no documentation link in the code; want at least secrets' pointer to the headless Secret Service section")
	}
}

// TestCheckLinks runs the checker on small trees, so that a checker that
// passes everything cannot pass TestDocLinks.
func TestCheckLinks(t *testing.T) {
	for _, tt := range []struct {
		name  string
		files map[string]string
		want  []string // substrings of the problems, one each; none: no problem
	}{
		{"good links", map[string]string{
			"README.md":    "# Top\n\nSee [a](docs/a.md), [b](docs/a.md#two-words), [self](#top), [dir](docs).\n",
			"docs/a.md":    "# A page\n\n## Two words\n\n[back](../README.md#top)\n",
			"docs/ref.txt": "",
		}, nil},
		{"missing file", map[string]string{
			"README.md": "[gone](docs/gone.md)\n",
		}, []string{"README.md:1: link docs/gone.md: docs/gone.md does not exist"}},
		{"missing anchor", map[string]string{
			"README.md": "# Top\n\n[x](#bottom)\n",
		}, []string{`README.md:3: link #bottom: no heading "bottom" in README.md`}},
		{"anchor in another page", map[string]string{
			"README.md": "[x](docs/a.md#nowhere)\n",
			"docs/a.md": "# A\n",
		}, []string{`no heading "nowhere" in docs/a.md`}},
		{"anchor is case-sensitive", map[string]string{
			"README.md": "## Security model\n\n[x](#Security-model)\n",
		}, []string{`no heading "Security-model"`}},
		{"outside the repository", map[string]string{
			"README.md": "[x](../../etc/passwd)\n",
		}, []string{"leaves the repository"}},
		{"links in code are not links", map[string]string{
			"README.md": "```\n[x](gone.md)\n```\n\n`[y](gone.md)` and\n~~~toml\n# [z](gone.md)\n~~~\n",
		}, nil},
		{"a heading in a code block is no anchor", map[string]string{
			"README.md": "```sh\n# not a heading\n```\n\n[x](#not-a-heading)\n",
		}, []string{`no heading "not-a-heading"`}},
		{"reference definition", map[string]string{
			"README.md": "[x][ref]\n\n[ref]: docs/gone.md\n",
		}, []string{"README.md:3: link docs/gone.md"}},
		{"external links are not checked", map[string]string{
			"README.md": "[a](https://example.com/x#y) [b](mailto:a@example.com) [c](//example.com)\n",
		}, nil},
		{"duplicate headings", map[string]string{
			"README.md": "## Notes\n\n## Notes\n\n[a](#notes) [b](#notes-1) [c](#notes-2)\n",
		}, []string{`no heading "notes-2"`}},
		{"link text across lines, title, escaped space", map[string]string{
			"README.md":       "[a long\ntext](docs/my%20page.md \"title\")\n",
			"docs/my page.md": "",
		}, nil},
		{"anchor into a file that is not markdown", map[string]string{
			"README.md": "[x](go.mod#module)\n",
			"go.mod":    "module x\n",
		}, []string{"go.mod is not a markdown file"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			var names []string
			for name, text := range tt.files {
				p := filepath.Join(root, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
				if strings.HasSuffix(name, ".md") {
					names = append(names, name)
				}
			}
			slices.Sort(names)
			got := checkLinks(os.DirFS(root), names)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d problems %q; want %d %q", len(got), got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d: got %q; want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

func TestAnchor(t *testing.T) {
	for _, tt := range []struct{ heading, want string }{
		{"Security model", "security-model"},
		{"Moving from ~/.ssh/config", "moving-from-sshconfig"},
		{"Mutual TLS (client certificates)", "mutual-tls-client-certificates"},
		{"Approvals: a person in the loop", "approvals-a-person-in-the-loop"},
		{"What the model sees: the text block and structuredContent", "what-the-model-sees-the-text-block-and-structuredcontent"},
		{"`ssh_exec` and `http_request`", "ssh_exec-and-http_request"},
		{"A [linked](x.md) **bold** word", "a-linked-bold-word"},
		{"Two  spaces", "two--spaces"},
		{"Café — déjà vu", "café--déjà-vu"},
		{"Closing hashes ##", "closing-hashes"},
	} {
		t.Run(tt.heading, func(t *testing.T) {
			if got := anchor(headingText("## " + tt.heading)); got != tt.want {
				t.Errorf("anchor(%q) = %q; want %q", tt.heading, got, tt.want)
			}
		})
	}
}

// link is one markdown link of a page: its target as written and the line
// it is on.
type link struct {
	target string
	line   int
}

// page is what the checker needs of a markdown file: its links, and the
// anchors its headings make.
type page struct {
	links   []link
	anchors map[string]bool
}

var (
	fence      = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+|$)`)
	codeSpan   = regexp.MustCompile("(`+)[^`]*?(`+)")
	// An inline link or image: ](target) or ](target "title").
	inlineLink = regexp.MustCompile(`\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+"[^"]*")?\s*\)`)
	// A reference definition: [label]: target.
	refDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(\S+)`)
	// A scheme (https:, mailto:) or a protocol-relative //host: not a path.
	external = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*:|//)`)
	// Markup a heading's text loses when GitHub renders it.
	inlineMarkup = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)|<[^>]*>|[*` + "`" + `]`)
)

// parseMarkdown reads a page's links and heading anchors, leaving out what
// is inside fenced code blocks and code spans.
func parseMarkdown(fsys fs.FS, name string) (*page, error) {
	src, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, err
	}
	p := &page{anchors: map[string]bool{}}
	used := map[string]int{}
	var inFence string
	for i, line := range strings.Split(string(src), "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case inFence == "":
				inFence = m[1]
			case m[1][0] == inFence[0] && len(m[1]) >= len(inFence):
				inFence = ""
			}
			continue
		}
		if inFence != "" {
			continue
		}
		if atxHeading.MatchString(line) {
			a := anchor(headingText(line))
			// GitHub numbers a repeated anchor: notes, notes-1, notes-2.
			if n := used[a]; n > 0 {
				used[a]++
				a = fmt.Sprintf("%s-%d", a, n)
			} else {
				used[a] = 1
			}
			p.anchors[a] = true
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			p.links = append(p.links, link{m[1], i + 1})
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "code"), -1) {
			p.links = append(p.links, link{strings.Trim(m[1], "<>"), i + 1})
		}
	}
	return p, nil
}

// headingText is the text of an ATX heading line: without the leading
// hashes, a closing sequence of hashes, and the markup that does not show.
func headingText(line string) string {
	text := strings.TrimSpace(atxHeading.ReplaceAllString(line, ""))
	if t := strings.TrimRight(text, "#"); t == "" || strings.HasSuffix(t, " ") {
		text = strings.TrimSpace(t)
	}
	return inlineMarkup.ReplaceAllStringFunc(text, func(m string) string {
		if sub := inlineMarkup.FindStringSubmatch(m); sub[1] != "" {
			return sub[1]
		}
		return ""
	})
}

// anchor is the fragment GitHub gives a heading: lower case, each space a
// '-', and every character other than letters, digits, marks, '-' and '_'
// dropped.
func anchor(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// resolveLink splits a relative link of the page from into the file it
// leads to (a clean path from the root; from itself when it has none) and
// its fragment. ok is false for a link that is not relative.
func resolveLink(from, target string) (file, fragment string, ok bool) {
	if external.MatchString(target) {
		return "", "", false
	}
	target, fragment, _ = strings.Cut(target, "#")
	if target == "" {
		return from, fragment, true
	}
	if unescaped, err := url.PathUnescape(target); err == nil {
		target = unescaped
	}
	return path.Join(path.Dir(from), target), fragment, true
}

// checkLinks returns a line for each relative link of the files that does
// not resolve: a file that does not exist or lies outside the root, or a
// fragment that is no heading of the markdown file it names.
func checkLinks(fsys fs.FS, files []string) []string {
	pages := map[string]*page{}
	load := func(name string) (*page, error) {
		if p, ok := pages[name]; ok {
			return p, nil
		}
		p, err := parseMarkdown(fsys, name)
		if err == nil {
			pages[name] = p
		}
		return p, err
	}
	var problems []string
	for _, from := range files {
		p, err := load(from)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", from, err))
			continue
		}
		for _, l := range p.links {
			file, fragment, ok := resolveLink(from, l.target)
			if !ok {
				continue
			}
			bad := func(format string, args ...any) {
				problems = append(problems, fmt.Sprintf("%s:%d: link %s: ", from, l.line, l.target)+fmt.Sprintf(format, args...))
			}
			if !fs.ValidPath(file) {
				bad("leaves the repository")
				continue
			}
			if _, err := fs.Stat(fsys, file); err != nil {
				bad("%s does not exist", file)
				continue
			}
			if fragment == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				bad("%s is not a markdown file, so it has no headings", file)
				continue
			}
			target, err := load(file)
			if err != nil {
				bad("%v", err)
				continue
			}
			if !target.anchors[fragment] {
				bad("no heading %q in %s", fragment, file)
			}
		}
	}
	return problems
}
