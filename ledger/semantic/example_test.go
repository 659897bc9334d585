package semantic_test

import (
	"encoding/json"
	"fmt"

	"github.com/idemkit/idemkit/ledger/semantic"
)

// The example request of semantic request digest v2: every semantic input, including the seed,
// the stop sequences, the output bound and a provider-specific option, is in
// the hashed object; tools are sorted by name; the transport timeout is not.
func ExampleDigestV2() {
	seed, maxTokens := int64(7), int64(256)
	req := semantic.Request{
		Provider:        "example",
		Model:           "model-1",
		Messages:        []semantic.Message{{Role: "user", Content: "hello"}},
		MaxOutputTokens: &maxTokens,
		Stop:            []string{"END"},
		Seed:            &seed,
		Options:         map[string]any{"reasoningEffort": "high"}, // hashed as vendor.example.reasoningEffort
	}
	canon, err := semantic.CanonicalV2(req)
	if err != nil {
		panic(err)
	}
	digest, err := semantic.DigestV2(req)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(canon))
	fmt.Println(semantic.RecipeV2, digest)

	// The same request in its wire form, with a transport-only member.
	var wire semantic.Request
	_ = json.Unmarshal([]byte(`{"provider":"example","model":"model-1","timeout":30,
		"messages":[{"role":"user","content":"hello"}],"maxOutputTokens":256,"stop":["END"],"seed":7,
		"providerOptions":{"vendor.example.reasoningEffort":"high"}}`), &wire)
	same, _ := semantic.DigestV2(wire)
	fmt.Println(same == digest)
	// Output:
	// {"model":"model-1","provider":"example","providerOptions":{"vendor.example.reasoningEffort":"high"},"recipe":"openwop-semantic-request-v2","request":{"maxOutputTokens":256,"messages":[{"content":"hello","role":"user"}],"seed":7,"stop":["END"]}}
	// openwop-semantic-request-v2 202a24a6a7ac8b9e23daef47c713e6fcfbd87577f1bdf1e2c9aa974bc5b781f6
	// true
}
