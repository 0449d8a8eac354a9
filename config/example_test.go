package config_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/certwatch/certwatch/config"
)

// TestExampleDocumentsEveryOption requires config.example.yaml to show
// every key the code accepts, set or commented out, so the file that
// documents the options cannot fall behind them.
func TestExampleDocumentsEveryOption(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	var walk func(t reflect.Type, path string, visit func(path, key string))
	walk = func(ty reflect.Type, path string, visit func(path, key string)) {
		for ty.Kind() == reflect.Pointer || ty.Kind() == reflect.Slice || ty.Kind() == reflect.Map {
			ty = ty.Elem()
		}
		if ty.Kind() != reflect.Struct {
			return
		}
		for f := range ty.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if !f.IsExported() || name == "" || name == "-" {
				continue
			}
			visit(path, name)
			walk(f.Type, path+"."+name, visit)
		}
	}
	walk(reflect.TypeFor[config.Config](), "", func(path, key string) {
		if !regexp.MustCompile(`(?m)^[ \t#-]*(\{.*)?\b`+regexp.QuoteMeta(key)+`:`).MatchString(text) &&
			!strings.Contains(text, " "+key+": ") && !strings.Contains(text, "{"+key+": ") {
			t.Errorf("config.example.yaml does not document %s.%s", strings.TrimPrefix(path, "."), key)
		}
	})
}
