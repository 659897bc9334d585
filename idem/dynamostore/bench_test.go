package dynamostore_test

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// Benchmarks of the store paths against the local emulators (one process,
// loopback HTTP): they measure the client side plus the emulator, not
// DynamoDB latency. Run: go test -run '^$' -bench . ./idem/dynamostore/
func BenchmarkStore(b *testing.B) {
	for _, kind := range dynamotest.Kinds() {
		b.Run(kind, func(b *testing.B) {
			e := dynamotest.Start(b, kind)
			s := newStore(b, e.Client(), e.CreateTable(b, "IdempotencyTable"))
			now := time.Now().Truncate(time.Millisecond)
			resp := done(`{"id":"run_01HZX","status":"accepted"}`, now)
			ctx := ctxT(b)

			b.Run("ClaimComplete", func(b *testing.B) {
				for i := 0; b.Loop(); i++ {
					id := newID()
					res, err := s.Claim(ctx, pending(id, "o", now), now)
					if err != nil {
						b.Fatal(err)
					}
					if err := s.Complete(ctx, res.Record, resp, now); err != nil {
						b.Fatal(err)
					}
				}
			})
			replay := func(b *testing.B, out idem.Outcome) {
				id := newID()
				res, err := s.Claim(ctx, pending(id, "o", now), now)
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Complete(ctx, res.Record, out, now); err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					res, err := s.Claim(ctx, pending(id, "o2", now), now)
					if err != nil || res.Decision != idem.Exists {
						b.Fatal(res.Decision, err)
					}
				}
			}
			b.Run("Replay", func(b *testing.B) { replay(b, resp) })
			b.Run("Replay1MBChunked", func(b *testing.B) {
				out := done("", now)
				out.Response.Body = make([]byte, 1<<20)
				_, _ = rand.Read(out.Response.Body)
				replay(b, out)
			})
		})
	}
}
