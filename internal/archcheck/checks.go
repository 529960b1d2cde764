package archcheck

import (
	"bytes"
	"fmt"
	"go/ast"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ImportProblems lists the packages the map leaves out or names without code, and every
// import of a package's non-test files that runs to its own or a higher floor, to its parent,
// or outside its row's list. Test files may import anything below their package's floor that
// is not their parent: tests reach for shared fixtures.
func ImportProblems(t *Tree, m Map) []string {
	var out []string
	for _, path := range sortedKeys(t.Packages) {
		p := t.Packages[path]
		row, ok := m[path]
		if !ok {
			out = append(out, fmt.Sprintf("%s: not in the map", path))
			continue
		}
		own := p.Imports(t.Module, false)
		for _, imp := range own {
			if msg := importProblem(m, row, imp); msg != "" {
				out = append(out, fmt.Sprintf("%s imports %s: %s", path, imp, msg))
			} else if !row.allows(imp) {
				out = append(out, fmt.Sprintf("%s imports %s: not in its row's may-import list", path, imp))
			}
		}
		for _, imp := range p.Imports(t.Module, true) {
			if slices.Contains(own, imp) || imp == path {
				continue
			}
			if msg := importProblem(m, row, imp); msg != "" {
				out = append(out, fmt.Sprintf("%s (tests) import %s: %s", path, imp, msg))
			}
		}
	}
	for _, path := range sortedKeys(m) {
		if _, ok := t.Packages[path]; !ok {
			out = append(out, fmt.Sprintf("%s: in the map, but no Go package there", path))
		}
	}
	return slices.Compact(out)
}

func importProblem(m Map, row Row, imp string) string {
	dst, ok := m[imp]
	switch {
	case !ok:
		return "a package the map does not name"
	case strings.HasPrefix(row.Package, imp+"/"):
		return "a child imports its parent"
	case dst.Floor >= row.Floor:
		return fmt.Sprintf("floor %d imports floor %d: imports run down only", row.Floor, dst.Floor)
	}
	return ""
}

// Func is a function (or method) of the tree and its length in lines.
type Func struct {
	File  string
	Name  string
	Lines int
}

// LongFuncs returns the functions of non-generated files longer than limit lines, tests
// included.
func LongFuncs(t *Tree, limit int) []Func {
	var out []Func
	eachFile(t, func(f *File) {
		if f.Generated {
			return
		}
		for _, d := range f.AST.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := f.Fset.Position(fd.End()).Line - f.Fset.Position(fd.Pos()).Line + 1
			if n > limit {
				out = append(out, Func{f.Path, fd.Name.Name, n})
			}
		}
	})
	return out
}

// WideOptions returns "file: Type (n fields)" for each struct type named *Config or *Options
// with more than limit fields.
func WideOptions(t *Tree, limit int) []string {
	var out []string
	eachFile(t, func(f *File) {
		ast.Inspect(f.AST, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			name := ts.Name.Name
			if !ok || !(strings.HasSuffix(name, "Config") || strings.HasSuffix(name, "Options")) {
				return true
			}
			if k := fieldCount(st); k > limit {
				out = append(out, fmt.Sprintf("%s: %s (%d fields)", f.Path, name, k))
			}
			return true
		})
	})
	return out
}

func fieldCount(st *ast.StructType) int {
	n := 0
	for _, f := range st.Fields.List {
		n += max(1, len(f.Names))
	}
	return n
}

// Importers returns the non-test files that import pkg (a standard library path).
func Importers(t *Tree, pkg string) []string {
	var out []string
	eachFile(t, func(f *File) {
		for _, is := range f.AST.Imports {
			if p, _ := strconv.Unquote(is.Path.Value); p == pkg && !f.Test {
				out = append(out, f.Path)
			}
		}
	})
	return out
}

// Calls returns "file: function" for each call of pkg.name (pkg as the file imports it, by
// its default name) in non-test files.
func Calls(t *Tree, pkg, name string) []string {
	var out []string
	eachFile(t, func(f *File) {
		if f.Test {
			return
		}
		for _, d := range f.AST.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if se, ok := n.(*ast.SelectorExpr); ok && se.Sel.Name == name {
					if id, ok := se.X.(*ast.Ident); ok && id.Name == pkg {
						out = append(out, f.Path+": "+fd.Name.Name)
					}
				}
				return true
			})
		}
	})
	return slices.Compact(out)
}

// TestHabits counts, over the test files: t.Parallel calls, files using testing/synctest, and
// time.Sleep calls.
type TestHabits struct {
	Parallel, SynctestFiles, Sleeps int
}

// CountTestHabits counts the tree's TestHabits. A time.Sleep inside a function run by
// synctest.Test advances the bubble's fake clock: it is not a wait, and is not counted.
func CountTestHabits(t *Tree) TestHabits {
	var h TestHabits
	eachFile(t, func(f *File) {
		if !f.Test {
			return
		}
		for _, is := range f.AST.Imports {
			if is.Path.Value == `"testing/synctest"` {
				h.SynctestFiles++
			}
		}
		var bubbles []ast.Node // the functions run in synctest bubbles
		ast.Inspect(f.AST, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if se, ok := call.Fun.(*ast.SelectorExpr); ok {
				id, _ := se.X.(*ast.Ident)
				switch {
				case se.Sel.Name == "Parallel" && len(call.Args) == 0 && id != nil && id.Name != "time":
					h.Parallel++
				case se.Sel.Name == "Test" && id != nil && id.Name == "synctest" && len(call.Args) == 2:
					bubbles = append(bubbles, call.Args[1])
				case se.Sel.Name == "Sleep" && id != nil && id.Name == "time" && !inside(call, bubbles):
					h.Sleeps++
				}
			}
			return true
		})
	})
	return h
}

// inside reports whether n lies within one of the nodes. ast.Inspect visits a synctest.Test
// call before its arguments, so a bubble is known before the calls in it.
func inside(n ast.Node, nodes []ast.Node) bool {
	for _, b := range nodes {
		if b.Pos() <= n.Pos() && n.End() <= b.End() {
			return true
		}
	}
	return false
}

// SourceFile is a file that counts toward the size limit.
type SourceFile struct {
	Path  string
	Lines int
}

// sourceExt are the kinds of source the size limit covers.
var sourceExt = []string{".go", ".cu", ".cuh", ".h", ".c", ".cpp", ".py", ".sh", ".tmpl"}

// LongFiles returns the non-generated source files under root over limit lines.
func LongFiles(root string, limit int) ([]SourceFile, error) {
	var out []SourceFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.Contains(sourceExt, filepath.Ext(path)) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(b, []byte("\n")); n > limit && !generated.Match(b) {
			rel, _ := filepath.Rel(root, path)
			out = append(out, SourceFile{filepath.ToSlash(rel), n})
		}
		return nil
	})
	return out, err
}

func eachFile(t *Tree, fn func(*File)) {
	for _, path := range sortedKeys(t.Packages) {
		for _, f := range t.Packages[path].Files {
			fn(f)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
