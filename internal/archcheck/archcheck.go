// Package archcheck reads the tree and docs/architecture.md and reports where the code breaks
// the layout rules the map states: imports that run up a floor or leave a package's list,
// packages the map does not name, files and functions over their size limits, wide Config and
// Options structs, and the process-level calls (os/signal, os.Exit) kept to one place. Its
// tests run these checks on the real tree, so the map stays true in every commit.
//
// Written by hand: the rules are this project's own, and go/parser gives all it needs.
package archcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrNoMap is returned when docs/architecture.md has no package table.
var ErrNoMap = errors.New("archcheck: no package table (a '| floor | package | job | may import |' table)")

// Row is one package of the map: its floor (imports run to lower floors only), its path
// relative to the module, its one job and the packages it may import (a path, or a prefix
// ending in "/..." for a subtree).
type Row struct {
	Floor     int
	Package   string
	Job       string
	MayImport []string
}

// Map is docs/architecture.md's package table, by package path.
type Map map[string]Row

// ParseMap reads the first Markdown table whose header starts with "floor | package" (cells in
// backquotes are unquoted; "-" or an empty cell is an empty import list).
func ParseMap(md []byte) (Map, error) {
	m := Map{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(md))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			if in {
				break
			}
			continue
		}
		cells := splitRow(line)
		switch {
		case !in && len(cells) >= 4 && strings.EqualFold(cells[0], "floor") && strings.EqualFold(cells[1], "package"):
			in = true
			continue
		case !in || strings.HasPrefix(cells[0], "--") || strings.HasPrefix(cells[0], ":-"):
			continue
		case len(cells) < 4:
			return nil, fmt.Errorf("archcheck: line %d: %d cells, want floor, package, job, may import", n, len(cells))
		}
		floor, err := strconv.Atoi(cells[0])
		if err != nil {
			return nil, fmt.Errorf("archcheck: line %d: floor %q: %w", n, cells[0], err)
		}
		r := Row{Floor: floor, Package: unquote(cells[1]), Job: cells[2]}
		for _, f := range strings.Split(cells[3], ",") {
			if f = unquote(strings.TrimSpace(f)); f != "" && f != "-" {
				r.MayImport = append(r.MayImport, f)
			}
		}
		if _, dup := m[r.Package]; dup {
			return nil, fmt.Errorf("archcheck: line %d: package %s named twice", n, r.Package)
		}
		m[r.Package] = r
	}
	if len(m) == 0 {
		return nil, ErrNoMap
	}
	return m, sc.Err()
}

func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	cells := strings.Split(line, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func unquote(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }

// allows reports whether the row lets its package import p.
func (r Row) allows(p string) bool {
	for _, m := range r.MayImport {
		if m == p || strings.HasSuffix(m, "/...") && (p == strings.TrimSuffix(m, "/...") || strings.HasPrefix(p, strings.TrimSuffix(m, "..."))) {
			return true
		}
	}
	return false
}

// File is one parsed Go file of the tree.
type File struct {
	Path      string // relative to the root, slash-separated
	Test      bool
	Generated bool
	Lines     int
	AST       *ast.File
	Fset      *token.FileSet
}

// Package is a directory's Go files (every build tag: a file behind a tag is part of the map).
type Package struct {
	Path  string // relative to the module root ("." for the root)
	Files []*File
}

// Imports returns the module's packages the package's files import, relative to the module
// (test files included when tests is set).
func (p *Package) Imports(module string, tests bool) []string {
	var out []string
	for _, f := range p.Files {
		if f.Test && !tests {
			continue
		}
		for _, is := range f.AST.Imports {
			path, _ := strconv.Unquote(is.Path.Value)
			if rel, ok := strings.CutPrefix(path, module+"/"); ok && !slices.Contains(out, rel) {
				out = append(out, rel)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Tree is the module's Go packages, by path.
type Tree struct {
	Root, Module string
	Packages     map[string]*Package
}

var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

// skipDir reports directories that hold no packages of the module: data, hidden folders.
func skipDir(name string) bool {
	return name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// Load parses every Go file under root (the module root, whose go.mod names the module).
func Load(root string) (*Tree, error) {
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("archcheck: %w", err)
	}
	line, _, _ := bytes.Cut(mod, []byte("\n"))
	t := &Tree{Root: root, Module: strings.TrimSpace(strings.TrimPrefix(string(line), "module")), Packages: map[string]*Package{}}
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		af, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return fmt.Errorf("archcheck: %w", err)
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := t.Packages[dir]
		if p == nil {
			p = &Package{Path: dir}
			t.Packages[dir] = p
		}
		p.Files = append(p.Files, &File{Path: rel, Test: strings.HasSuffix(rel, "_test.go"),
			Generated: generated.Match(src), Lines: bytes.Count(src, []byte("\n")), AST: af, Fset: fset})
		return nil
	})
	return t, err
}
