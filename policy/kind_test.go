package policy_test

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/build"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/policy"
)

// TestKindsRegistered type-checks every package of the module (test files
// aside) and finds every constant of type policy.Kind: a constant declared
// with that type, a string literal given to a Finding's Kind, an untyped
// constant converted to a Kind. Each must be a registered kind, and each
// registered kind must be used somewhere, so the registry and the code
// cannot drift apart whichever package a new kind is raised in. Kinds are
// declared only in policy, and no Kind is made from a string at run time.
func TestKindsRegistered(t *testing.T) {
	t.Parallel()
	root, modPath := moduleRoot(t)
	uses, err := kindUses(root, modPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(uses.constants) == 0 {
		t.Fatal("the analysis found no constant of type policy.Kind at all; it is broken")
	}
	for kind, at := range uses.constants {
		if kind == "" {
			continue // the zero Kind: no finding (verdict.kind == "")
		}
		if _, ok := policy.Kind(kind).Info(); !ok {
			t.Errorf("kind %q (%s) is not in policy's registry of kinds (policy/kind.go): add it there, with its problem text, deadline and origin", kind, strings.Join(at, ", "))
		}
	}
	for _, k := range policy.Kinds() {
		if _, ok := uses.constants[string(k)]; !ok {
			t.Errorf("registered kind %q is used nowhere outside tests: remove it from the registry, or raise it", k)
		}
	}
	for _, d := range uses.declaredOutside {
		t.Errorf("%s declares a policy.Kind outside package policy: declare it in policy/kind.go and register it", d)
	}
	for _, c := range uses.dynamic {
		t.Errorf("%s makes a policy.Kind from a value known only at run time: use a registered constant", c)
	}
}

func TestKindInfo(t *testing.T) {
	t.Parallel()
	for _, k := range policy.Kinds() {
		info, _ := k.Info()
		if info.Problem == "" || info.Origin == "" {
			t.Errorf("kind %q: registry entry %+v lacks a problem text or an origin", k, info)
		}
		if strings.Contains(info.Problem, policy.When) && !info.Deadline {
			t.Errorf("kind %q: its problem text says when its deadline is, but it has none", k)
		}
	}
	if _, ok := policy.Kind("no_such_kind").Info(); ok {
		t.Error(`Info("no_such_kind") ok = true, want false`)
	}
}

// moduleRoot returns the directory holding go.mod above the test's
// directory, and the module path.
func moduleRoot(t *testing.T) (string, string) {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatalf("the module root is expected one level above policy: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "module "); ok {
			return dir, strings.TrimSpace(p)
		}
	}
	t.Fatal("go.mod names no module")
	return "", ""
}

type kindReport struct {
	// constants maps each constant Kind value to where it appears.
	constants       map[string][]string
	declaredOutside []string
	dynamic         []string
}

// kindUses type-checks the module's packages from source. Packages outside
// the module, the standard library included, are left empty: what they
// would give is not needed to find the Kind constants, and the type errors
// their absence causes are ignored.
func kindUses(root, modPath string) (*kindReport, error) {
	fset := token.NewFileSet()
	dirs := map[string]string{} // import path -> directory
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() {
			rel, _ := filepath.Rel(root, p)
			dirs[path.Join(modPath, filepath.ToSlash(rel))] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	l := &loader{root: root, fset: fset, modPath: modPath, dirs: dirs, pkgs: map[string]*checked{}}
	rep := &kindReport{constants: map[string][]string{}}
	for _, ip := range slices.Sorted(func(yield func(string) bool) {
		for k := range dirs {
			if !yield(k) {
				return
			}
		}
	}) {
		c, err := l.load(ip)
		if err != nil {
			return nil, err
		}
		if c == nil {
			continue
		}
		l.report(c, rep)
	}
	return rep, nil
}

type checked struct {
	pkg   *types.Package
	info  *types.Info
	files []*ast.File
}

type loader struct {
	root    string
	fset    *token.FileSet
	modPath string
	dirs    map[string]string
	pkgs    map[string]*checked
}

// load type-checks the package at import path ip, or returns nil when its
// directory holds no Go file for this platform.
func (l *loader) load(ip string) (*checked, error) {
	if c, ok := l.pkgs[ip]; ok {
		return c, nil
	}
	l.pkgs[ip] = nil // an import cycle ends here rather than recursing
	bp, err := build.Default.ImportDir(l.dirs[ip], 0)
	if err != nil {
		if _, ok := err.(*build.NoGoError); ok {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: %w", ip, err)
	}
	var files []*ast.File
	for _, name := range bp.GoFiles {
		f, err := parser.ParseFile(l.fset, filepath.Join(bp.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}}
	conf := types.Config{Importer: l, Error: func(error) {}, FakeImportC: true}
	pkg, _ := conf.Check(ip, l.fset, files, info) // errors from the empty foreign packages are expected
	c := &checked{pkg: pkg, info: info, files: files}
	l.pkgs[ip] = c
	return c, nil
}

// Import gives the module's packages type-checked from source and every
// other package empty.
func (l *loader) Import(ip string) (*types.Package, error) {
	if ip == l.modPath || strings.HasPrefix(ip, l.modPath+"/") {
		c, err := l.load(ip)
		if err != nil || c == nil {
			return nil, fmt.Errorf("import %s: %v", ip, err)
		}
		return c.pkg, nil
	}
	name := path.Base(ip)
	name, _, _ = strings.Cut(name, ".")
	p := types.NewPackage(ip, strings.ReplaceAll(name, "-", "_"))
	p.MarkComplete()
	return p, nil
}

// pos names a position relative to the module root.
func (l *loader) pos(p token.Pos) string {
	s := l.fset.Position(p).String()
	if rel, err := filepath.Rel(l.root, s); err == nil {
		return rel
	}
	return s
}

func (l *loader) isKind(t types.Type) bool {
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Kind" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == l.modPath+"/policy"
}

func (l *loader) report(c *checked, rep *kindReport) {
	for e, tv := range c.info.Types {
		if !l.isKind(tv.Type) {
			continue
		}
		if tv.Value != nil && tv.Value.Kind() == constant.String {
			v := constant.StringVal(tv.Value)
			rep.constants[v] = append(rep.constants[v], l.pos(e.Pos()))
		}
	}
	for id, obj := range c.info.Defs {
		if k, ok := obj.(*types.Const); ok && l.isKind(k.Type()) && c.pkg.Path() != l.modPath+"/policy" {
			rep.declaredOutside = append(rep.declaredOutside, fmt.Sprintf("%s (%s)", l.pos(id.Pos()), id.Name))
		}
	}
	for _, f := range c.files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			fun, ok := c.info.Types[call.Fun]
			if !ok || !fun.IsType() || !l.isKind(fun.Type) {
				return true
			}
			if arg, ok := c.info.Types[call.Args[0]]; !ok || arg.Value == nil {
				rep.dynamic = append(rep.dynamic, l.pos(call.Pos()))
			}
			return true
		})
	}
}
