package ledger_test

import (
	"encoding/json"
	"fmt"

	"github.com/idemkit/idemkit/ledger"
)

// The RFC 0150 §C example request: every semantic input, including the seed,
// the stop sequences, the output bound and a provider-specific option, is in
// the hashed object; tools are sorted by name; the transport timeout is not.
func ExampleSemanticDigestV2() {
	seed, maxTokens := int64(7), int64(256)
	req := ledger.SemanticRequest{
		Provider:        "example",
		Model:           "model-1",
		Messages:        []ledger.SemanticMessage{{Role: "user", Content: "hello"}},
		MaxOutputTokens: &maxTokens,
		Stop:            []string{"END"},
		Seed:            &seed,
		Options:         map[string]any{"reasoningEffort": "high"}, // hashed as vendor.example.reasoningEffort
	}
	canon, err := ledger.SemanticCanonicalV2(req)
	if err != nil {
		panic(err)
	}
	digest, err := ledger.SemanticDigestV2(req)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(canon))
	fmt.Println(ledger.SemanticRecipeV2, digest)

	// The same request in its wire form, with a transport-only member.
	var wire ledger.SemanticRequest
	_ = json.Unmarshal([]byte(`{"provider":"example","model":"model-1","timeout":30,
		"messages":[{"role":"user","content":"hello"}],"maxOutputTokens":256,"stop":["END"],"seed":7,
		"providerOptions":{"vendor.example.reasoningEffort":"high"}}`), &wire)
	same, _ := ledger.SemanticDigestV2(wire)
	fmt.Println(same == digest)
	// Output:
	// {"model":"model-1","provider":"example","providerOptions":{"vendor.example.reasoningEffort":"high"},"recipe":"openwop-semantic-request-v2","request":{"maxOutputTokens":256,"messages":[{"content":"hello","role":"user"}],"seed":7,"stop":["END"]}}
	// openwop-semantic-request-v2 202a24a6a7ac8b9e23daef47c713e6fcfbd87577f1bdf1e2c9aa974bc5b781f6
	// true
}
