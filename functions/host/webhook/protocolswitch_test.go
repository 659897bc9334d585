package webhook

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
)

// TestWebhookProtocolSwitchEndsWithinTimeout: a receiver that answers the
// POST "101 Switching Protocols" and then holds the connection open (here
// trickling a byte every 100 ms, for 10 s) cannot hold the try past
// Webhook.Timeout. net/http hands a 101's connection over as its body, and
// the client's timeout does not bound reads of it: the sender read it, up
// to 1 MiB, for as long as the receiver kept it open (the executor's whole
// invocation, or for ever where nothing ends the context), its claim
// renewed all along. The answer is the delivery's final failure, as
// before.
func TestWebhookProtocolSwitchEndsWithinTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := http.ReadRequest(r)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
				for range 600 { // 60 s: far past the bound below
					if _, err := c.Write([]byte("x")); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
	}()
	w := newTestWebhook(t, WebhookPolicy{AllowLoopback: true})
	w.Timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = w.Deliver(context.Background(), webhookRun(t, "http://"+ln.Addr().String()+"/"))
	// 20 s: the 300 ms timeout with room for a loaded machine; a read
	// of the switched connection runs the receiver's whole 60 s.
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("the try took %v past its 300 ms timeout", took)
	}
	var fe *ledger.FailedError
	if !errors.As(err, &fe) || !strings.Contains(fe.Message, "101") {
		t.Fatalf("%v, want the recorded failure 'webhook answered 101'", err)
	}
}
