package semantic

import (
	"strings"
	"testing"
)

// BenchmarkSemanticDigestV2: a typical chat request (system prompt, a
// ten-turn conversation of ~1 KB messages, three tools, sampling settings
// and a vendor option).
func BenchmarkSemanticDigestV2(b *testing.B) {
	r := baseSemantic()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 24)
	for i := range 10 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		r.Messages = append(r.Messages, Message{Role: role, Content: text})
	}
	r.Tools = append(r.Tools, Tool{Name: "search", Description: "Search the web", Parameters: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}, "required": []any{"q"}}})
	canon, err := CanonicalV2(r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(canon)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DigestV2(r); err != nil {
			b.Fatal(err)
		}
	}
}
