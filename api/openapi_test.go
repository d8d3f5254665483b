package api

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"octflow/api/auth"
	"octflow/codec"
)

func TestOpenAPIDocumentsEveryRouteAndNoOther(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	tokens, _ := auth.NewTokens(nil)
	keys, _ := codec.NewKeys("k")
	sealer, err := codec.New(keys)
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, Config{Tokens: tokens, PayloadCodec: sealer})
	param := regexp.MustCompile(`:(\w+)`)
	wildcard := regexp.MustCompile(`\*$`)
	var routed []string
	for _, r := range srv.echo.Routes() {
		if strings.HasPrefix(r.Method, "echo_") { // Echo's own not-found routes of a group
			continue
		}
		routed = append(routed, r.Method+" "+wildcard.ReplaceAllString(param.ReplaceAllString(r.Path, "{$1}"), "{path}"))
	}
	slices.Sort(documented)
	slices.Sort(routed)
	routed = slices.Compact(routed)
	if !slices.Equal(documented, routed) {
		t.Errorf("openapi.yaml documents\n%v\nthe gateway routes\n%v", documented, routed)
	}
}

// In a YAML flow mapping an unquoted comma starts a new key: {description:
// a, b} is a description "a" and a key "b" without a value. The
// document has no key without a value.
func TestOpenAPIHasNoKeyWithoutAValue(t *testing.T) {
	var doc any
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if e == nil {
					t.Errorf("openapi.yaml: %s/%s has no value (an unquoted comma in a flow mapping?)", path, k)
				}
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range v {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	walk("", doc)
}
