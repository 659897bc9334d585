package apikeys

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// staleGet answers GetItem with a read taken earlier: a rotation that read
// the item before another one wrote it.
type staleGet struct {
	DynamoAPI
	out *dynamodb.GetItemOutput
}

func (s staleGet) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return s.out, nil
}

// TestSigningSecretRotation (RED_TEAM 340): a rotation writes a new
// "whsec_" secret of 32 bytes and keeps the one it replaces signing for the
// grace only; a rotation racing another writes nothing; a removal leaves
// the tenant unsigned; one tenant's secret is never another's; a stored
// secret that does not parse is an error that does not quote it. On the
// emulators.
func TestSigningSecretRotation(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c, tbl := e.Client(), e.CreateTable(t, "ApiKeysTable")
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		fresh := func() *SigningSecrets {
			return &SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return now }}
		}
		if got, err := fresh().WebhookSecrets(ctx, "acme"); err != nil || got != nil {
			t.Fatalf("no secret: %v %v; want none", got, err)
		}
		first, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 24*time.Hour, now)
		if err != nil || !first.PreviousUntil.IsZero() {
			t.Fatalf("first rotation %+v %v; want no previous kept", first.PreviousUntil, err)
		}
		k1, err := ParseSigningSecret(first.Secret)
		if err != nil || len(k1) != 32 || !strings.HasPrefix(first.Secret, "whsec_") {
			t.Fatalf("secret of %d bytes, %v", len(k1), err)
		}
		if got, err := fresh().WebhookSecrets(ctx, "acme"); err != nil || len(got) != 1 || !bytes.Equal(got[0], k1) {
			t.Fatalf("after the first rotation: %d secrets, %v", len(got), err)
		}
		if got, _ := fresh().WebhookSecrets(ctx, "globex"); got != nil {
			t.Fatal("globex reads acme's secret")
		}
		// The item is no credential: it carries no tenant, and no key's
		// hash names it.
		if _, ok, err := (&DynamoKeys{Client: c, Table: tbl}).Credential(ctx, SigningItemPrefix+"acme"); ok || err != nil || ValidHash(SigningItemPrefix+"acme") {
			t.Fatalf("the signing item resolves as a credential: %v %v", ok, err)
		}
		before, _ := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: signingKey("acme"), ConsistentRead: aws.Bool(true)})
		second, err := RotateSigningSecret(ctx, c, tbl, "acme", "", time.Hour, now)
		if err != nil || !second.PreviousUntil.Equal(now.Add(time.Hour)) || second.Secret == first.Secret {
			t.Fatalf("second rotation %+v %v", second.PreviousUntil, err)
		}
		k2, _ := ParseSigningSecret(second.Secret)
		if got, err := fresh().WebhookSecrets(ctx, "acme"); err != nil || len(got) != 2 || !bytes.Equal(got[0], k2) || !bytes.Equal(got[1], k1) {
			t.Fatalf("during the grace: %d secrets %v; want the new one, then the previous one", len(got), err)
		}
		now = now.Add(time.Hour)
		if got, err := fresh().WebhookSecrets(ctx, "acme"); err != nil || len(got) != 1 || !bytes.Equal(got[0], k2) {
			t.Fatalf("after the grace: %d secrets %v; want the new one alone", len(got), err)
		}
		// A rotation that read the item before this one wrote it.
		if _, err := RotateSigningSecret(ctx, staleGet{c, before}, tbl, "acme", "", time.Hour, now); !errors.Is(err, ErrRotatedConcurrently) {
			t.Fatalf("a racing rotation: %v; want ErrRotatedConcurrently", err)
		}
		if got, _ := fresh().WebhookSecrets(ctx, "acme"); len(got) != 1 || !bytes.Equal(got[0], k2) {
			t.Fatal("a refused rotation changed the secret")
		}
		// No grace: the previous secret stops at once.
		third, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 0, now)
		if err != nil || !third.PreviousUntil.IsZero() {
			t.Fatalf("rotation without grace %+v %v", third.PreviousUntil, err)
		}
		if got, _ := fresh().WebhookSecrets(ctx, "acme"); len(got) != 1 {
			t.Fatalf("%d secrets after a rotation without grace; want 1", len(got))
		}
		// A given secret (another region's): written as given, the
		// current one kept for the grace; given again, nothing written;
		// one that does not parse, refused without quoting it.
		given := NewSigningSecret()
		g, err := RotateSigningSecret(ctx, c, tbl, "acme", given, time.Hour, now)
		if err != nil || g.Secret != given || g.Unchanged || g.PreviousUntil.IsZero() {
			t.Fatalf("a given secret: %+v %v", g.PreviousUntil, err)
		}
		if g, err := RotateSigningSecret(ctx, c, tbl, "acme", given, time.Hour, now); err != nil || !g.Unchanged {
			t.Fatalf("the same secret again: unchanged %v, %v; want nothing written", g.Unchanged, err)
		}
		kg, _ := ParseSigningSecret(given)
		k3, _ := ParseSigningSecret(third.Secret)
		if got, _ := fresh().WebhookSecrets(ctx, "acme"); len(got) != 2 || !bytes.Equal(got[0], kg) || !bytes.Equal(got[1], k3) {
			t.Fatalf("after a given secret and its repeat: %d secrets; want it, then the one it replaced", len(got))
		}
		for _, bad := range []string{"whsec_c2hvcnQ=", "sk_" + strings.TrimPrefix(given, "whsec_"), "whsec_not base64!"} {
			if _, err := RotateSigningSecret(ctx, c, tbl, "acme", bad, time.Hour, now); err == nil || strings.Contains(err.Error(), strings.TrimPrefix(bad, "whsec_")) {
				t.Fatalf("a bad given secret: %v; want a refusal that does not quote it", err)
			}
		}
		if found, err := RemoveSigningSecret(ctx, c, tbl, "acme"); err != nil || !found {
			t.Fatal(found, err)
		}
		if found, err := RemoveSigningSecret(ctx, c, tbl, "acme"); err != nil || found {
			t.Fatal(found, err)
		}
		if got, err := fresh().WebhookSecrets(ctx, "acme"); err != nil || got != nil {
			t.Fatalf("after the removal: %v %v; want unsigned", got, err)
		}
		// A malformed stored secret: an error, never the value.
		bad := "whsec_c2hvcnQ="
		item := signingKey("initech")
		item["secret"] = sAV(bad)
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item}); err != nil {
			t.Fatal(err)
		}
		if got, err := fresh().WebhookSecrets(ctx, "initech"); err == nil || got != nil || strings.Contains(err.Error(), "c2hvcnQ") {
			t.Fatalf("malformed secret: %v %v; want an error that does not quote it", got, err)
		}
	})
}

// TestSigningSecretsCachedRead pins the round trips (RED_TEAM 340): a
// delivery reads its tenant's secret through the cache, one GetItem per
// tenant per TTL (a tenant without a secret cached as such), and a
// rotation reaches the reads at most TTL later. On the emulators.
func TestSigningSecretsCachedRead(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		tbl := e.CreateTable(t, "ApiKeysTable")
		cnt := dynamotest.NewCounter()
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		if _, err := RotateSigningSecret(ctx, e.Client(), tbl, "acme", "", time.Hour, now); err != nil {
			t.Fatal(err)
		}
		s := &SigningSecrets{Client: e.Client(cnt.Middleware()), Table: tbl, Now: func() time.Time { return now }}
		for i := 0; i < 5; i++ {
			if got, err := s.WebhookSecrets(ctx, "acme"); err != nil || len(got) != 1 {
				t.Fatal(got, err)
			}
			if got, err := s.WebhookSecrets(ctx, "globex"); err != nil || got != nil {
				t.Fatal(got, err)
			}
		}
		if ops := cnt.CallOps(); cnt.Calls() != 2 || ops["GetItem"] != 2 {
			t.Fatalf("ten reads of two tenants made %v; want one GetItem per tenant", ops)
		}
		rot, err := RotateSigningSecret(ctx, e.Client(), tbl, "acme", "", time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		now = now.Add(DefaultSecretCacheTTL - time.Second)
		if got, _ := s.WebhookSecrets(ctx, "acme"); len(got) != 1 {
			t.Fatalf("within the TTL: %d secrets; want the cached one", len(got))
		}
		now = now.Add(time.Second)
		want, _ := ParseSigningSecret(rot.Secret)
		if got, _ := s.WebhookSecrets(ctx, "acme"); len(got) != 2 || !bytes.Equal(got[0], want) {
			t.Fatalf("at the TTL: %d secrets; want the rotation's two", len(got))
		}
		if n := cnt.Calls(); n != 3 {
			t.Fatalf("%d calls; want 3", n)
		}
	})
}

// TestRotationWhoseAnswerWasLostLandsOnce (RED_TEAM 347): a rotation whose
// PutItem landed and whose answer was lost (the SDK retries it, and the
// retry's condition fails on the item the first try wrote) is the
// rotation that landed: it returns the secret it wrote, with the grace it
// wrote, instead of ErrRotatedConcurrently ("nothing written", the new
// secret never printed, and the next rotation ending the grace of the
// secret the receiver still holds at once). A rotation another one
// overtook is still refused. On the emulators.
func TestRotationWhoseAnswerWasLostLandsOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		tbl := e.CreateTable(t, "ApiKeysTable")
		f := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, f.Middleware())
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		read := func() [][]byte {
			t.Helper()
			got, err := (&SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return now }}).WebhookSecrets(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		// The first rotation (no item before: attribute_not_exists).
		f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		first, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 24*time.Hour, now)
		if err != nil || f.Fired() != 1 {
			t.Fatalf("a first rotation whose answer was lost: %v (faults fired %d); want the secret it wrote", err, f.Fired())
		}
		k1, _ := ParseSigningSecret(first.Secret)
		if got := read(); len(got) != 1 || !bytes.Equal(got[0], k1) {
			t.Fatalf("%d secrets; want the one the rotation returned", len(got))
		}
		// A rotation over it (conditional on the secret read).
		f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		second, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 24*time.Hour, now)
		if err != nil || f.Fired() != 2 || !second.PreviousUntil.Equal(now.Add(24*time.Hour)) {
			t.Fatalf("a rotation whose answer was lost: %v, previous until %v; want the secret it wrote and its grace", err, second.PreviousUntil)
		}
		k2, _ := ParseSigningSecret(second.Secret)
		if got := read(); len(got) != 2 || !bytes.Equal(got[0], k2) || !bytes.Equal(got[1], k1) {
			t.Fatalf("%d secrets; want the returned one, then the one it replaced", len(got))
		}
		// Overtaken: another rotation wrote between this one's read and
		// its write: refused, and the other's secret stands.
		before, _ := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: signingKey("acme"), ConsistentRead: aws.Bool(true)})
		third, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 24*time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RotateSigningSecret(ctx, staleGetOnce{DynamoAPI: c, out: before, used: new(bool)}, tbl, "acme", "", 24*time.Hour, now); !errors.Is(err, ErrRotatedConcurrently) {
			t.Fatalf("an overtaken rotation: %v; want ErrRotatedConcurrently", err)
		}
		k3, _ := ParseSigningSecret(third.Secret)
		// The other rotation's: k3, and k2 and k1 in their graces (RED_TEAM 353).
		if got := read(); len(got) != 3 || !bytes.Equal(got[0], k3) || !bytes.Equal(got[1], k2) || !bytes.Equal(got[2], k1) {
			t.Fatalf("%d secrets after an overtaken rotation; want the other rotation's", len(got))
		}
	})
}

// staleGetOnce answers its first GetItem with a read taken earlier, the
// later ones from the table.
type staleGetOnce struct {
	DynamoAPI
	out  *dynamodb.GetItemOutput
	used *bool
}

func (s staleGetOnce) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if s.used == nil || !*s.used {
		if s.used != nil {
			*s.used = true
		}
		return s.out, nil
	}
	return s.DynamoAPI.GetItem(ctx, in, o...)
}

// TestRotationKeepsAtMostFourGraces (RED_TEAM 353): the replaced secrets
// kept signing are bounded: a rotation with a grace that would keep more
// than MaxPreviousSecrets is refused, naming when the first kept grace
// ends, and writes nothing; one without a grace is accepted; a secret
// whose grace ended is dropped from the item at the next rotation. A
// rotation whose answer was lost over an item of several replaced
// secrets still lands once (RED_TEAM 347). On the emulators.
func TestRotationKeepsAtMostFourGraces(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		tbl := e.CreateTable(t, "ApiKeysTable")
		f := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, f.Middleware())
		t0 := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		now := t0
		read := func() int {
			t.Helper()
			got, err := (&SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return now }}).WebhookSecrets(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			return len(got)
		}
		rotate := func(grace time.Duration) (Rotation, error) {
			return RotateSigningSecret(ctx, c, tbl, "acme", "", grace, now)
		}
		if _, err := rotate(0); err != nil {
			t.Fatal(err)
		}
		// Four rotations a minute apart, graces of 4h, 3h, 5h, 6h: the
		// first ends soonest at t0+3h+1m (the second's).
		for i, g := range []time.Duration{4, 3, 5, 6} {
			now = now.Add(time.Minute)
			if i == 3 {
				// Its answer lost: it lands, with the earlier graces.
				f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			}
			rot, err := rotate(g * time.Hour)
			if err != nil {
				t.Fatalf("rotation %d: %v", i+1, err)
			}
			if len(rot.Earlier) != i {
				t.Fatalf("rotation %d reports %d earlier graces, want %d", i+1, len(rot.Earlier), i)
			}
		}
		if f.Fired() != 1 {
			t.Fatalf("faults fired %d, want 1", f.Fired())
		}
		if n := read(); n != 5 {
			t.Fatalf("%d secrets sign; want the current one and four in their graces", n)
		}
		before, _ := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: signingKey("acme"), ConsistentRead: aws.Bool(true)})
		now = now.Add(time.Minute)
		_, err := rotate(time.Hour)
		var limit *GraceLimitError
		if !errors.As(err, &limit) || !limit.Until.Equal(t0.Add(2*time.Minute+3*time.Hour)) {
			t.Fatalf("a fifth grace: %v; want GraceLimitError until %v", err, t0.Add(2*time.Minute+3*time.Hour))
		}
		after, _ := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: signingKey("acme"), ConsistentRead: aws.Bool(true)})
		if value(after.Item["secret"]) != value(before.Item["secret"]) || read() != 5 {
			t.Fatal("a refused rotation wrote")
		}
		// At the first grace's end: accepted, that secret dropped.
		now = limit.Until
		rot, err := rotate(time.Hour)
		if err != nil || len(rot.Earlier) != 3 {
			t.Fatalf("at the first grace's end: %v, %d earlier graces; want accepted, 3", err, len(rot.Earlier))
		}
		if n := read(); n != 5 {
			t.Fatalf("%d secrets sign; want 5", n)
		}
		// Without a grace: accepted at any time, the kept ones kept.
		if rot, err = rotate(0); err != nil || !rot.PreviousUntil.IsZero() || len(rot.Earlier) != 4 {
			t.Fatalf("a rotation without a grace: %v, %d earlier; want accepted, the four kept", err, len(rot.Earlier))
		}
		// Once every grace has ended, the next rotation keeps none of them.
		now = now.Add(7 * time.Hour)
		if n := read(); n != 1 {
			t.Fatalf("%d secrets sign after every grace; want 1", n)
		}
		if _, err := rotate(time.Hour); err != nil {
			t.Fatal(err)
		}
		item, _ := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: signingKey("acme"), ConsistentRead: aws.Bool(true)})
		if _, ok := item.Item["earlier"]; ok || item.Item["previous"] == nil {
			t.Fatalf("the item keeps secrets whose graces ended: %v", item.Item["earlier"])
		}
	})
}

// TestRemovalWhoseAnswerWasLostReportsIt (RED_TEAM 354): a removal whose
// DeleteItem landed and whose answer was lost (the SDK's retry finds
// nothing to delete) reports the secret removed, not "none"; a tenant
// without one is still none. On the emulators.
func TestRemovalWhoseAnswerWasLostReportsIt(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		tbl := e.CreateTable(t, "ApiKeysTable")
		c := e.Client()
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		if _, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 0, now); err != nil {
			t.Fatal(err)
		}
		lost := &retriedDelete{SecretRemover: c}
		if found, err := RemoveSigningSecret(ctx, lost, tbl, "acme"); err != nil || !found || lost.sent != 2 {
			t.Fatalf("a removal whose answer was lost: found %v, %v (%d DeleteItem sent); want found", found, err, lost.sent)
		}
		if got, err := (&SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return now }}).WebhookSecrets(ctx, "acme"); err != nil || got != nil {
			t.Fatalf("after the removal: %d secrets, %v; want none", len(got), err)
		}
		if found, err := RemoveSigningSecret(ctx, c, tbl, "acme"); err != nil || found {
			t.Fatalf("a second removal: found %v, %v; want none", found, err)
		}
		// The same through the SDK's own retry of a lost answer.
		if _, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 0, now); err != nil {
			t.Fatal(err)
		}
		f := dynamotest.NewFaults()
		fc := e.Client(dynamotest.FastRetries, f.Middleware())
		f.FailNextAfterSend("DeleteItem", 1, dynamotest.ResponseLost())
		if found, err := RemoveSigningSecret(ctx, fc, tbl, "acme"); err != nil || !found || f.Fired() != 1 {
			t.Fatalf("a removal whose answer was lost, retried by the SDK: found %v, %v (faults fired %d); want found", found, err, f.Fired())
		}
	})
}

// value is a string or number attribute's text; "" for any other, or none.
func value(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return "S" + v.Value
	case *types.AttributeValueMemberN:
		return "N" + v.Value
	}
	return ""
}

// retriedDelete sends each DeleteItem twice and answers with the second
// try's answer: a delete that landed, whose answer was lost, retried by
// the SDK (the same request again).
type retriedDelete struct {
	SecretRemover
	sent int
}

func (r *retriedDelete) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	r.sent += 2
	if _, err := r.SecretRemover.DeleteItem(ctx, in, o...); err != nil {
		return nil, err
	}
	return r.SecretRemover.DeleteItem(ctx, in, o...)
}

// TestRotationRepairsAHandEditedItem (RED_TEAM 356): a rotation of an item
// holding a secret that does not parse (its current one, a replaced one,
// or an earlier entry missing its until) keeps none of those signing,
// and keeps every well-formed replaced secret in its grace: deliveries
// are signed again with the new secret and the good replaced ones, never
// refused for the whole grace. A replaced secret that does not parse and
// whose grace ended no longer stops deliveries. On the emulators.
func TestRotationRepairsAHandEditedItem(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		tbl := e.CreateTable(t, "ApiKeysTable")
		c := e.Client()
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		good := NewSigningSecret()
		goodKey, _ := ParseSigningSecret(good)
		until := strconv.FormatInt(now.Add(time.Hour).Unix(), 10)
		put := func(item map[string]types.AttributeValue) {
			t.Helper()
			item["pk"] = &types.AttributeValueMemberS{Value: SigningItemPrefix + "acme"}
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item}); err != nil {
				t.Fatal(err)
			}
		}
		s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
		n := func(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }
		signer := func(at time.Time) *SigningSecrets {
			return &SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return at }}
		}
		for name, item := range map[string]map[string]types.AttributeValue{
			"current does not parse": {"secret": s("whsec_garbage"), "previous": s(good), "previousUntil": n(until)},
			"previous does not parse": {"secret": s(NewSigningSecret()), "previous": s("whsec_garbage"), "previousUntil": n(until),
				"earlier": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"secret": s(good), "until": n(until)}}}}},
			"earlier lacks its until": {"secret": s(NewSigningSecret()), "previous": s(good), "previousUntil": n(until),
				"earlier": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"secret": s(NewSigningSecret())}}}}},
		} {
			put(item)
			if _, err := signer(now).WebhookSecrets(ctx, "acme"); err == nil {
				t.Fatalf("%s: the hand-edited item was read without an error", name)
			}
			rot, err := RotateSigningSecret(ctx, c, tbl, "acme", "", time.Hour, now)
			if err != nil {
				t.Fatalf("%s: rotate: %v", name, err)
			}
			got, err := signer(now).WebhookSecrets(ctx, "acme")
			if err != nil {
				t.Fatalf("%s: after the rotation the deliveries are still refused for the grace: %v", name, err)
			}
			newKey, _ := ParseSigningSecret(rot.Secret)
			if len(got) == 0 || !bytes.Equal(got[0], newKey) {
				t.Fatalf("%s: the new secret does not sign first", name)
			}
			kept := false
			for _, k := range got[1:] {
				kept = kept || bytes.Equal(k, goodKey)
			}
			if !kept {
				t.Fatalf("%s: the well-formed replaced secret in its grace no longer signs (%d keys)", name, len(got))
			}
		}
		// A replaced secret that does not parse and whose grace ended
		// signs nothing, so it refuses nothing.
		cur := NewSigningSecret()
		put(map[string]types.AttributeValue{"secret": s(cur), "previous": s("whsec_garbage"), "previousUntil": n(strconv.FormatInt(now.Add(-time.Second).Unix(), 10))})
		got, err := signer(now).WebhookSecrets(ctx, "acme")
		curKey, _ := ParseSigningSecret(cur)
		if err != nil || len(got) != 1 || !bytes.Equal(got[0], curKey) {
			t.Fatalf("an ended grace's garbage: %d keys, %v; want the current one", len(got), err)
		}
	})
}

// TestRotationWithoutGraceIsNeverRefused (RED_TEAM 357): a rotation with
// --grace 0 of an item a hand edit left holding more than
// MaxPreviousSecrets replaced secrets in their graces is written (the
// refusal's own advice is to rotate with --grace 0), adding none, and
// every one of them keeps signing until its grace ends; one with a grace
// is refused until enough graces ended to make room for its own.
func TestRotationWithoutGraceIsNeverRefused(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		tbl := e.CreateTable(t, "ApiKeysTable")
		c := e.Client()
		now := time.Date(2026, 12, 7, 5, 0, 0, 0, time.UTC)
		item := signingKey("acme")
		item["secret"] = sAV(NewSigningSecret())
		var prev []prevSecret
		for i := 0; i <= MaxPreviousSecrets; i++ {
			prev = append(prev, prevSecret{NewSigningSecret(), now.Add(time.Duration(i+1) * time.Hour).Unix()})
		}
		putPrevious(item, prev)
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(tbl), Item: item}); err != nil {
			t.Fatal(err)
		}
		// One with a grace is refused until enough graces ended to make
		// room for its own: two of the five, here.
		var limit *GraceLimitError
		if _, err := RotateSigningSecret(ctx, c, tbl, "acme", "", time.Hour, now); !errors.As(err, &limit) || !limit.Until.Equal(now.Add(2*time.Hour)) {
			t.Fatalf("a rotation with a grace: %v; want refused until %v", err, now.Add(2*time.Hour))
		}
		rot, err := RotateSigningSecret(ctx, c, tbl, "acme", "", 0, now)
		if err != nil {
			t.Fatalf("a rotation without a grace was refused: %v", err)
		}
		if !rot.PreviousUntil.IsZero() || len(rot.Earlier) != len(prev) {
			t.Fatalf("rotation: previous until %v, %d earlier; want none added and %d kept", rot.PreviousUntil, len(rot.Earlier), len(prev))
		}
		got, err := (&SigningSecrets{Client: c, Table: tbl, Now: func() time.Time { return now }}).WebhookSecrets(ctx, "acme")
		if err != nil || len(got) != 1+len(prev) {
			t.Fatalf("after the rotation: %d keys, %v; want %d", len(got), err, 1+len(prev))
		}
	})
}
