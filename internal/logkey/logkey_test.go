package logkey_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// unmigrated lists log calls that still spell their keys out, by file and
// message: code being rewritten elsewhere. Remove entries as they move to
// the constants.
var unmigrated = map[string]map[string]bool{}

// skipped files are not checked at all.
var skipped = map[string]bool{}

// Every log call of the runtime, the root package, the HTTP API and the
// CLI names its attributes with this package's constants (or local
// constants aliasing them), never with a string literal, so one concept
// has one key.
func TestLogCallsUseTheKeys(t *testing.T) {
	root := filepath.Join("..", "..")
	for _, dir := range []string{".", "internal/dispatch", "internal/turn", "internal/cli", "httpapi", "provider/sqlite", "provider/postgres", "dashboard"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			rel := filepath.ToSlash(filepath.Join(dir, filepath.Base(path)))
			if strings.HasSuffix(path, "_test.go") || skipped[rel] {
				continue
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok {
					// Local key constants (logKeyX) must alias this package's.
					for i, name := range vs.Names {
						if strings.HasPrefix(name.Name, "logKey") && i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
								t.Errorf("%s: %s = %s; use a logkey constant", fset.Position(lit.Pos()), name.Name, lit.Value)
							}
						}
					}
					return true
				}
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if lit := attrKey(call); lit != nil {
					// An Attr built outside a log call (a slice of
					// attributes handed to LogAttrs later) names its key
					// too.
					t.Errorf("%s: attribute key %s is a literal; use a logkey constant", fset.Position(lit.Pos()), lit.Value)
					return true
				}
				msg, keys := logCall(call)
				if keys == nil || unmigrated[rel][msg] {
					return true
				}
				for _, k := range keys {
					if lit, ok := k.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						t.Errorf("%s: log key %s is a literal; use a logkey constant", fset.Position(lit.Pos()), lit.Value)
					}
				}
				return true
			})
		}
	}
}

// logCall recognizes a slog call (Debug, Info, Warn, Error, their Context
// forms, Log, With) and returns its message ("" for With) and the
// expressions in key position; keys is nil for other calls.
func logCall(call *ast.CallExpr) (msg string, keys []ast.Expr) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", nil
	}
	args := call.Args
	switch name := sel.Sel.Name; name {
	case "With":
		return "", keysOf(args)
	case "Debug", "Info", "Warn", "Error":
	case "DebugContext", "InfoContext", "WarnContext", "ErrorContext":
		if len(args) == 0 {
			return "", nil
		}
		args = args[1:]
	case "Log":
		if len(args) < 2 {
			return "", nil
		}
		args = args[2:]
	default:
		return "", nil
	}
	if len(args) == 0 {
		return "", nil
	}
	lit, ok := args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", nil // not a log call (or a message built at run time)
	}
	msg, _ = strconv.Unquote(lit.Value)
	return msg, append([]ast.Expr{}, keysOf(args[1:])...)
}

// keysOf returns the keys of slog's alternating key-value arguments and
// of slog.Attr constructors (slog.String("k", v), ...) among them.
func keysOf(args []ast.Expr) []ast.Expr {
	var keys []ast.Expr
	for i := 0; i < len(args); i++ {
		if c, ok := args[i].(*ast.CallExpr); ok {
			if s, ok := c.Fun.(*ast.SelectorExpr); ok {
				if pkg, ok := s.X.(*ast.Ident); ok && pkg.Name == "slog" && len(c.Args) > 0 {
					keys = append(keys, c.Args[0]) // an Attr takes one position
					continue
				}
			}
		}
		keys = append(keys, args[i])
		i++ // skip the value
	}
	return keys
}

// attrConstructors are the slog functions that build an Attr from a key.
var attrConstructors = map[string]bool{
	"String": true, "Int": true, "Int64": true, "Uint64": true, "Float64": true,
	"Bool": true, "Time": true, "Duration": true, "Any": true, "Group": true,
}

// attrKey returns the key of an slog.Attr constructor call whose key is a
// string literal (slog.String("k", v)), or nil.
func attrKey(call *ast.CallExpr) *ast.BasicLit {
	s, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || !attrConstructors[s.Sel.Name] || len(call.Args) == 0 {
		return nil
	}
	if pkg, ok := s.X.(*ast.Ident); !ok || pkg.Name != "slog" {
		return nil
	}
	lit, ok := call.Args[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return nil
	}
	return lit
}
