package idem

import (
	"strings"
	"testing"
)

// TestTemplatedNamesEveryRoutersParameters: an operation is a template
// when a segment is a parameter in any router's syntax ("{id}", ":id",
// "*path", a bare "*"), and only then: a ':' or '*' inside a segment
// ("/orders:batchCreate", "/v1/a*b") names no parameter, so such a
// concrete operation keeps its fingerprint without the path.
func TestTemplatedNamesEveryRoutersParameters(t *testing.T) {
	for op, want := range map[string]bool{
		"POST /orders/{id}":          true,
		"POST /files/{path...}":      true,
		"POST /orders/:id":           true,
		"POST /orders/:id/refund":    true,
		"POST /files/*path":          true,
		"/files/*":                   true,
		":id":                        true,
		"POST /orders":               false,
		"POST /orders/":              false,
		"POST /orders:batchCreate":   false,
		"POST /v1/orders/a*b":        false,
		"POST example.com:8080/runs": false,
		"":                           false,
	} {
		if got := templated(op); got != want {
			t.Errorf("templated(%q) = %t, want %t", op, got, want)
		}
	}
}

// TestTemplateNames: the parameter names of a template in each syntax
// templated reads (RED_TEAM 315).
func TestTemplateNames(t *testing.T) {
	for op, want := range map[string]string{
		"POST /orders/{id}/refund":                "id",
		"POST /shops/{shop}/orders/{id:[0-9]{3}}": "shop,id",
		"POST /files/{rest...}":                   "rest",
		"ANY /{proxy+}":                           "proxy",
		"POST /orders/{$}":                        "",
		"POST /orders/:id/items/*path":            "id,path",
		"POST /files/*":                           "*",
		"POST /orders:batchCreate":                "",
		"POST example.com/a/{x}.{y}":              "x,y",
	} {
		var got []string
		templateNames(op, func(n string) { got = append(got, n) })
		if strings.Join(got, ",") != want {
			t.Errorf("templateNames(%q) = %q, want %q", op, got, want)
		}
	}
}
