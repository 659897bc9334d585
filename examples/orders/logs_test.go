package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
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

// The SQS consumer's log names each message it ships by its message id and
// never carries the message's body (an order, a customer's details):
// RED_TEAM 475, shipOrder logged every body.
func TestConsumerLogsNoBody(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		setLocalEnv(t, e)
		var buf syncBuffer
		prev := log.Writer()
		log.SetOutput(&buf)
		t.Cleanup(func() { log.SetOutput(prev) })
		_, shipOrders, err := handlers(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("m-%d", time.Now().UnixNano())
		body := `{"order":"1","customer":"ada@example.com"}`
		resp, err := shipOrders(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: body}}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch: %v %v", resp.BatchItemFailures, err)
		}
		out := buf.String()
		t.Logf("consumer log:\n%s", out)
		if strings.Contains(out, "ada@example.com") {
			t.Errorf("the consumer logged the message's body")
		}
		if !strings.Contains(out, "shipping") || !strings.Contains(out, id) {
			t.Errorf("the consumer's log does not name the shipped message %s", id)
		}
	})
}
