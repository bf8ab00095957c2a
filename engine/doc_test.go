package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
)

// TestAliasDocs checks that the comment of every aliased data-model type in
// types.go names each exported field and method of the type it aliases, so
// that `go doc ./engine.Selector` and friends never drift from the code.
func TestAliasDocs(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "types.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.TYPE {
			continue
		}
		for _, sp := range g.Specs {
			ts := sp.(*ast.TypeSpec)
			if !ts.Assign.IsValid() {
				continue
			}
			doc := ts.Doc
			if doc == nil {
				doc = g.Doc
			}
			docs[ts.Name.Name] = doc.Text()
		}
	}
	types := map[string]reflect.Type{
		"Point":    reflect.TypeFor[Point](),
		"Tag":      reflect.TypeFor[Tag](),
		"Field":    reflect.TypeFor[Field](),
		"Value":    reflect.TypeFor[Value](),
		"Kind":     reflect.TypeFor[Kind](),
		"Sample":   reflect.TypeFor[Sample](),
		"Selector": reflect.TypeFor[Selector](),
		"Matcher":  reflect.TypeFor[Matcher](),
		"MatchOp":  reflect.TypeFor[MatchOp](),
		"SyncMode": reflect.TypeFor[SyncMode](),

		"CorruptionError": reflect.TypeFor[CorruptionError](),
		"PointError":      reflect.TypeFor[PointError](),
	}
	for name, typ := range types {
		doc, ok := docs[name]
		if !ok || doc == "" {
			t.Errorf("alias %s has no doc comment in types.go", name)
			continue
		}
		if typ.Kind() == reflect.Struct {
			for i := range typ.NumField() {
				fld := typ.Field(i)
				if fld.IsExported() && !strings.Contains(doc, fld.Name) {
					t.Errorf("doc of %s does not show field %s", name, fld.Name)
				}
			}
		}
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			if !strings.Contains(doc, ") "+m.Name+"(") {
				t.Errorf("doc of %s does not show method %s", name, m.Name)
			}
		}
	}
}
