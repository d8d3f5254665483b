package api

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
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
	tokens, _ := NewTokens(nil)
	srv := newServer(t, Config{Tokens: tokens})
	param := regexp.MustCompile(`:(\w+)`)
	var routed []string
	for _, r := range srv.echo.Routes() {
		routed = append(routed, r.Method+" "+param.ReplaceAllString(r.Path, "{$1}"))
	}
	// /metrics is routed only when a registry is given.
	routed = append(routed, "GET /metrics")
	slices.Sort(documented)
	slices.Sort(routed)
	routed = slices.Compact(routed)
	if !slices.Equal(documented, routed) {
		t.Errorf("openapi.yaml documents\n%v\nthe gateway routes\n%v", documented, routed)
	}
}
