package main

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is this repository's module path.
const module = "github.com/actiongw/actiongw"

// archRow is a row of ARCHITECTURE.md's package table: the packages it
// names (a name ending in "/..." stands for that package and those under
// it), and the project's packages they may import: any ("everything"),
// none ("—"), or those named (again with "/..." and "internal/*" for every
// internal package).
type archRow struct {
	packages, imports []string
	any               bool
}

// readArchTable parses the table under "## Packages" in ARCHITECTURE.md.
func readArchTable(t *testing.T) []archRow {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := regexp.MustCompile("`([^`]+)`")
	var rows []archRow
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		switch {
		case line == "## Packages":
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "## "):
			return rows
		case !strings.HasPrefix(line, "| `"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 3 {
			t.Fatalf("ARCHITECTURE.md: a package row has %d cells, want 3: %q", len(cells), line)
		}
		var r archRow
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			r.packages = append(r.packages, m[1])
		}
		switch deps := strings.TrimSpace(cells[2]); deps {
		case "everything":
			r.any = true
		case "—":
		default:
			// Names in backquotes, before any comment in brackets.
			for _, m := range code.FindAllStringSubmatch(regexp.MustCompile(`\([^)]*\)`).ReplaceAllString(deps, ""), -1) {
				r.imports = append(r.imports, m[1])
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// covers reports whether name, in a row's list, stands for pkg.
func covers(name, pkg string) bool {
	switch {
	case name == "internal/*":
		return strings.HasPrefix(pkg, "internal/")
	case strings.HasSuffix(name, "/..."):
		base := strings.TrimSuffix(name, "/...")
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return name == pkg
}

// projectImports returns each package of the repository (its directory
// from the root) with the project's packages its non-test files import,
// on every platform.
func projectImports(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != repoRoot && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(repoRoot, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		imports := pkgs[dir]
		for _, spec := range f.Imports {
			if ip := strings.Trim(spec.Path.Value, `"`); strings.HasPrefix(ip, module+"/") {
				imports = append(imports, strings.TrimPrefix(ip, module+"/"))
			}
		}
		slices.Sort(imports)
		pkgs[dir] = slices.Compact(imports)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestArchitectureTable checks ARCHITECTURE.md's package table against
// the code: every package is in it, every package it names exists, each
// imports only what its row says, and no import runs up the table (a row
// imports only rows below it, or itself: a package with sub-packages).
func TestArchitectureTable(t *testing.T) {
	rows := readArchTable(t)
	if len(rows) == 0 {
		t.Fatal("ARCHITECTURE.md has no package table under ## Packages")
	}
	pkgs := projectImports(t)
	rowOf := func(pkg string) int {
		for i, r := range rows {
			if slices.ContainsFunc(r.packages, func(n string) bool { return covers(n, pkg) }) {
				return i
			}
		}
		return -1
	}
	for _, pkg := range slices.Sorted(maps.Keys(pkgs)) {
		i := rowOf(pkg)
		if i < 0 {
			t.Errorf("package %s is not in ARCHITECTURE.md's table", pkg)
			continue
		}
		r := rows[i]
		for _, imp := range pkgs[pkg] {
			j := rowOf(imp)
			switch {
			case j < 0:
				// Reported as a package of its own.
			case j == i:
				// Within the row: a package and those under it.
			case !r.any && !slices.ContainsFunc(r.imports, func(n string) bool { return covers(n, imp) }):
				t.Errorf("%s imports %s, which its row in ARCHITECTURE.md does not list", pkg, imp)
			case j < i:
				t.Errorf("%s imports %s, which ARCHITECTURE.md's table lists above it (an import that runs upward)", pkg, imp)
			}
		}
	}
	for _, r := range rows {
		for _, name := range r.packages {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(pkgs)), func(p string) bool { return covers(name, p) }) {
				t.Errorf("ARCHITECTURE.md names %s, which is no package of this repository", name)
			}
		}
	}
}
