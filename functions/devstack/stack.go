package devstack

import (
	"context"
	"errors"
	"maps"
	"slices"
)

// ErrConfig is matched (errors.Is) by Start's error when Options are not
// valid; nothing was started then. A bad setting also matches
// settings.ErrConfig.
var ErrConfig = errors.New("devstack: invalid options")

// Stack is a running local stack: started by Start, ended by Stop (or by
// the end of Start's context).
type Stack struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // dev's result, set before done is closed

	// Set before Start returns.
	url, endpoint string
	keys          []string
	tables        map[string]string
}

// Start starts the whole stack on this machine, as `idemkit dev` does: a
// DynamoDB engine (unless Options.Endpoint is given), the tables of
// template.yaml, the HTTP API on Options.Addr through the authorizer and api
// handler code Lambda runs, and the executor and auditor driven by the
// tables' streams. It returns once the API serves (GET /.well-known/openwop
// answers 200), or the first error; with an ErrConfig error nothing was
// started, and with any error nothing is left running. The stack runs
// until Stop is called or ctx ends.
func Start(ctx context.Context, o Options) (*Stack, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Stack{cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		s.err = dev(ctx, o, o.Stdout, o.Logger, s, ready)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		cancel()
		return nil, s.err
	}
}

// URL is the base URL of the HTTP API ("http://127.0.0.1:3000").
func (s *Stack) URL() string { return s.url }

// Endpoint is the DynamoDB endpoint the stack uses (the engine it started,
// or Options.Endpoint, or the serializing proxy in front of a moto server).
func (s *Stack) Endpoint() string { return s.endpoint }

// APIKeys are the seeded API keys, "KEY=TENANT": Options.APIKeys, or the
// minted demo keys.
func (s *Stack) APIKeys() []string { return slices.Clone(s.keys) }

// Tables maps each table's template.yaml logical ID to its name.
func (s *Stack) Tables() map[string]string { return maps.Clone(s.tables) }

// Done is closed once the stack has stopped: after Stop, after Start's ctx
// ended, or when the HTTP server failed (Stop then reports why).
func (s *Stack) Done() <-chan struct{} { return s.done }

// Stop stops the stack and everything it started (the HTTP server after
// its in-flight requests, up to 10 s; the pollers; the engine) and waits
// until all of it has. It returns the HTTP server's error if serving
// failed, else nil; calling it again returns the same.
func (s *Stack) Stop() error {
	s.cancel()
	<-s.done
	return s.err
}
