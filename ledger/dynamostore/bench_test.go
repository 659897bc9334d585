package dynamostore_test

import (
	"context"
	"github.com/idemkit/idemkit/ledger/identity"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/dynamostore"
)

func ok(context.Context, ledger.Call) ([]byte, error) { return []byte("ok"), nil }

// BenchmarkDo measures Do against each emulator: a first effect (2 round
// trips: claim, outcome; no Fencer) and a suppressed duplicate (1, or 2
// without ALL_OLD).
func BenchmarkDo(b *testing.B) {
	for _, kind := range dynamotest.Kinds() {
		e := dynamotest.Start(b, kind)
		st := newStore(b, e.Client(), e.CreateTable(b, "EffectsTable"))
		l, _ := ledger.New(ledger.Config{Store: st})
		ctx := context.Background()
		b.Run(kind+"/first", func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "bench", Key: kind + strconv.Itoa(i)})
				if _, err := l.Do(ctx, ledger.Effect{Identity: id}, ok); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/duplicate", func(b *testing.B) {
			id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "bench", Key: kind + "-dup"})
			eff := ledger.Effect{Identity: id}
			if _, err := l.Do(ctx, eff, ok); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if r, err := l.Do(ctx, eff, ok); err != nil || !r.Replayed {
					b.Fatal(r, err)
				}
			}
		})
	}
}

// BenchmarkRecordCodec measures the client CPU of encoding and decoding a
// completed effect record (two attempts, a streamed outcome) in the compact
// layout the store writes and in the previous layout it still reads.
func BenchmarkRecordCodec(b *testing.B) {
	rec := fullRecord()
	compact, _ := dynamostore.EncodeRecord(rec)
	previous, err := dynamostore.EncodePreviousLayout(rec)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("compact/encode", func(b *testing.B) {
		for b.Loop() {
			_, _ = dynamostore.EncodeRecord(rec)
		}
	})
	b.Run("previous/encode", func(b *testing.B) {
		for b.Loop() {
			_, _ = dynamostore.EncodePreviousLayout(rec)
		}
	})
	for name, av := range map[string]map[string]types.AttributeValue{"compact": compact, "previous": previous} {
		b.Run(name+"/decode", func(b *testing.B) {
			for b.Loop() {
				if _, err := dynamostore.DecodeRecord(av); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
