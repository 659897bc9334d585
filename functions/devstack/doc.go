// Package devstack is the reference host run on one machine, the stack
// behind `idemkit dev`: a DynamoDB engine (or a given endpoint), the tables
// of template.yaml, the HTTP API served through the same authorizer and api
// handler code Lambda runs (translated to and from API Gateway payload 2.0
// events, with API Gateway's authorizer cache and framing; unlike API
// Gateway, which buffers a Lambda's answer, it holds a live run's event
// stream open with keep-alive comments until the terminal event:
// devsse.go), and the executor and auditor driven by polling the tables' streams as event
// source mappings would. On an engine without DynamoDB Streams (dynalite)
// the executor is fed the runs the stack itself writes and resumes instead, and
// nothing is audited (writeFeed).
//
// Start runs it in-process, for end-to-end tests and benchmarks as much as
// for the CLI:
//
//	s, err := devstack.Start(ctx, devstack.Options{Addr: "127.0.0.1:0"})
//	if err != nil { ... }
//	defer s.Stop()
//	resp, err := http.Get(s.URL() + "/.well-known/openwop")
//
// The CLI (cmd/idemkit) only parses flags into Options and prints.
package devstack
