package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every OCTFLOW_* setting is declared in this package: a command, a part
// or a tool that read one itself would give it a second owner, with a
// default and a check of its own.
func TestNoSettingIsDeclaredOutsideConfig(t *testing.T) {
	variable := regexp.MustCompile(`^"OCTFLOW_[A-Z0-9_]+"$`)
	// The calls that read a setting: config's binders and the
	// environment's.
	reads := []string{"String", "Int", "Float", "Duration", "Bool", "Secret", "SecretFile", "Getenv", "LookupEnv"}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "config" && filepath.Dir(path) == root) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !slices.Contains(reads, sel.Sel.Name) {
				return true
			}
			for _, arg := range call.Args {
				if lit, ok := arg.(*ast.BasicLit); ok && lit.Kind == token.STRING && variable.MatchString(lit.Value) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d reads %s itself: declare it in config", rel, fset.Position(call.Pos()).Line, lit.Value)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("looked at %d Go files under %s: not the repository", files, root)
	}
}
