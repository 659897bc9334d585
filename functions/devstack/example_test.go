package devstack_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/functions/devstack"
)

// Start runs the whole stack in-process (here on a moto server it starts
// itself, the API on a free port); Stop ends it and everything it started.
func ExampleStart() {
	s, err := devstack.Start(context.Background(), devstack.Options{
		Addr: "127.0.0.1:0", Engine: "moto", APIKeys: []string{"idk_example_0123456789=acme"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Stop()

	post := func() *http.Response {
		req, _ := http.NewRequest("POST", s.URL()+"/runs", strings.NewReader(`{"workflowId":"conformance-noop"}`))
		req.Header.Set("Authorization", "Bearer idk_example_0123456789")
		req.Header.Set("Idempotency-Key", "example-key-0123456789")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		return resp
	}
	first, again := post(), post()
	fmt.Println(first.StatusCode, again.StatusCode, again.Header.Get("OpenWOP-Idempotent-Replay"))
	// Output: 201 201 true
}
