package webhook

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// signedWith returns, for each space-separated webhook-signature entry of
// d in order, which of secrets it verifies under (by the receiver's own
// check, one entry at a time); -1 for none.
func signedWith(d delivery, secrets ...string) []int {
	var out []int
	for _, sig := range strings.Split(d.h.Get("webhook-signature"), " ") {
		h := d.h.Clone()
		h.Set("webhook-signature", sig)
		who := -1
		for i, s := range secrets {
			if verifyStandardWebhook(s, h, d.body) {
				who = i
			}
		}
		out = append(out, who)
	}
	return out
}

// TestEveryGraceKeepsSigning (RED_TEAM 353): a second rotation within the
// first one's grace keeps the oldest secret signing until its own grace
// ends. Two rotations inside the grace, then a delivery carries three
// signatures, the newest secret's first, each verifying by the receiver's
// own check; once the first grace ends, two; and an item written before
// (one previous secret) still signs with both. Through the executor's
// reader of the api-keys table, on the emulators.
func TestEveryGraceKeepsSigning(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c, tbl := e.Client(), e.CreateTable(t, "ApiKeysTable")
		var r *signRig
		secrets := &apikeys.SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return r.clk.Now() }}
		r = newSignRig(t, secrets)
		rotate := func(grace time.Duration) string {
			t.Helper()
			rot, err := apikeys.RotateSigningSecret(ctx, c, tbl, "acme", "", grace, r.clk.Now())
			if err != nil {
				t.Fatal(err)
			}
			return rot.Secret
		}
		deliver := func() delivery {
			t.Helper()
			r.clk.Advance(apikeys.DefaultSecretCacheTTL) // past the executor's cache
			if _, err := r.w.Deliver(ctx, r.run(t, "acme")); err != nil {
				t.Fatal(err)
			}
			got := r.deliveries()
			return got[len(got)-1]
		}
		s1 := rotate(0)
		s2 := rotate(2 * time.Hour) // s1 signs until +2h
		r.clk.Advance(time.Hour)
		s3 := rotate(24 * time.Hour) // s2 until +25h; s1 still until +2h
		if got := signedWith(deliver(), s3, s2, s1); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
			t.Fatalf("two rotations inside the first grace: signatures by %v (indexes of s3, s2, s1); want [0 1 2]", got)
		}
		r.clk.Advance(time.Hour) // s1's grace has ended
		if got := signedWith(deliver(), s3, s2, s1); len(got) != 2 || got[0] != 0 || got[1] != 1 {
			t.Fatalf("after the first grace: signatures by %v; want [0 1]", got)
		}
		// The shape every item had before: one previous secret.
		old, cur := apikeys.NewSigningSecret(), apikeys.NewSigningSecret()
		until := r.clk.Now().Add(time.Hour).Unix()
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: map[string]types.AttributeValue{
			"pk":            &types.AttributeValueMemberS{Value: apikeys.SigningItemPrefix + "acme"},
			"secret":        &types.AttributeValueMemberS{Value: cur},
			"previous":      &types.AttributeValueMemberS{Value: old},
			"previousUntil": &types.AttributeValueMemberN{Value: itoa(until)},
			"rotatedAt":     &types.AttributeValueMemberN{Value: itoa(r.clk.Now().Unix())},
		}}); err != nil {
			t.Fatal(err)
		}
		if got := signedWith(deliver(), cur, old); len(got) != 2 || got[0] != 0 || got[1] != 1 {
			t.Fatalf("an item of one previous secret: signatures by %v; want [0 1]", got)
		}
		// Rotated again inside its grace: both keep signing.
		s4 := rotate(time.Hour)
		if got := signedWith(deliver(), s4, cur, old); len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 2 {
			t.Fatalf("a rotation over an item of one previous secret: signatures by %v; want [0 1 2]", got)
		}
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
