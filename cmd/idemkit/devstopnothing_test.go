package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevSecondInterruptWithNothingInFlightCutsNothing: Ctrl-C pressed
// twice at once (as many do) while no request is in flight stops dev as
// usual, exit 0, and nothing says that requests in flight were cut: there
// were none. (With one in flight, TestDevSecondInterruptStopsAtOnce holds
// that the line says so.)
func TestDevSecondInterruptWithNothingInFlightCutsNothing(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	addr := testutil.FreeAddr(t)
	out, w := newPipeOut()
	var errb syncBuffer
	second := make(chan struct{})
	close(second) // the second Ctrl-C comes with the first
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), secondInterruptKey{}, (<-chan struct{})(second)))
	defer cancel()
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"dev", "--addr", addr, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("twice%d-", time.Now().UnixNano())}, w, &errb)
		w.Close()
	}()
	waitServing(t, out, addr, code)
	time.Sleep(300 * time.Millisecond) // dev past its start, waiting for a stop
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("idemkit dev exited %d:\n%s", c, errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("idemkit dev did not stop")
	}
	if strings.Contains(errb.String(), "were cut") {
		t.Fatalf("dev says requests in flight were cut, with none in flight:\n%s", errb.String())
	}
}

// syncBuffer is a strings.Builder safe for one writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
