package apikeys

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

func TestDynamoKeys(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		keys := &DynamoKeys{Client: e.Client(), Table: e.CreateTable(t, "ApiKeysTable")}
		k := NewAPIKey()
		if err := keys.PutKey(ctx, k, "acme"); err != nil {
			t.Fatal(err)
		}
		if err := keys.PutKey(ctx, k, "globex"); !errors.Is(err, ErrKeyExists) {
			t.Fatal(err)
		}
		if tn, ok, err := keys.Tenant(ctx, HashKey(k)); err != nil || !ok || tn != "acme" {
			t.Fatal(tn, ok, err)
		}
		if _, ok, err := keys.Tenant(ctx, HashKey("nope")); err != nil || ok {
			t.Fatal(ok, err)
		}
		if err := keys.PutKey(ctx, NewAPIKey(), "bad tenant"); err == nil {
			t.Fatal("bad tenant accepted")
		}
		// Credential attributes round-trip; a key without them has none.
		ka := NewAPIKey()
		want := Credential{Tenant: "acme", Attrs: map[string]string{"namespace": "shop", "worker": "checkout", "organisation": "Örg"}}
		if err := keys.PutCredential(ctx, ka, want); err != nil {
			t.Fatal(err)
		}
		if c, ok, err := keys.Credential(ctx, HashKey(ka)); err != nil || !ok || c.Tenant != "acme" || fmt.Sprint(c.Attrs) != fmt.Sprint(want.Attrs) {
			t.Fatal(c, ok, err)
		}
		if c, ok, err := keys.Credential(ctx, HashKey(k)); err != nil || !ok || c.Attrs != nil {
			t.Fatal(c, ok, err)
		}
		if err := keys.PutCredential(ctx, NewAPIKey(), Credential{Tenant: "acme", Attrs: map[string]string{"tenantId": "globex"}}); !errors.Is(err, ErrCredentialInvalid) {
			t.Fatalf("an attribute shadowing tenantId: %v", err)
		}
	})
}

func TestMemStores(t *testing.T) {
	ctx := context.Background()
	k := NewMemKeys()
	if err := k.PutKey(ctx, "secret", "acme"); err != nil {
		t.Fatal(err)
	}
	if err := k.PutKey(ctx, "secret", "globex"); !errors.Is(err, ErrKeyExists) {
		t.Fatal(err)
	}
	if ten, ok, _ := k.Tenant(ctx, HashKey("secret")); !ok || ten != "acme" {
		t.Fatal(ten, ok)
	}
	if _, ok, _ := k.Tenant(ctx, HashKey("other")); ok {
		t.Fatal("unknown key resolved")
	}
	k1, k2 := NewAPIKey(), NewAPIKey()
	if !strings.HasPrefix(k1, "idk_") || len(k1) != 36 || k1 == k2 {
		t.Fatal("NewAPIKey")
	}
}

// consistentSpy records whether each GetItem asked for a strongly
// consistent read.
type consistentSpy struct {
	DynamoAPI
	consistent []bool
}

func (s *consistentSpy) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.consistent = append(s.consistent, aws.ToBool(in.ConsistentRead))
	return &dynamodb.GetItemOutput{}, nil
}

// TestKeyLookupIsConsistent: the authorizer's lookup reads the key's item
// strongly consistently, so a deleted (revoked) key is refused at the
// first lookup after its delete, and a created one accepted at once: a
// revoked key lives no longer than the authorizer's cache.
func TestKeyLookupIsConsistent(t *testing.T) {
	spy := &consistentSpy{}
	if _, ok, err := (&DynamoKeys{Client: spy, Table: "T"}).Credential(context.Background(), "h"); ok || err != nil {
		t.Fatalf("%v %v", ok, err)
	}
	if len(spy.consistent) != 1 || !spy.consistent[0] {
		t.Fatalf("reads %v, want one strongly consistent read", spy.consistent)
	}
}

// TestValidKeyIsPrintableASCIIWithoutWhitespace: ValidKey is KeyRule, byte
// for byte: 1..MaxKeyLen bytes, each printable ASCII and not a space
// (0x21..0x7e); every other byte (controls, NUL, \v, \f, DEL, any byte of
// a non-ASCII character) anywhere in the key refuses it.
func TestValidKeyIsPrintableASCIIWithoutWhitespace(t *testing.T) {
	for b := 0; b < 256; b++ {
		want := b >= 0x21 && b <= 0x7e
		for _, k := range []string{string([]byte{byte(b)}), "ab" + string([]byte{byte(b)}) + "cd", "abcd" + string([]byte{byte(b)})} {
			if got := ValidKey(k); got != want {
				t.Errorf("ValidKey(%q) = %v, want %v", k, got, want)
			}
		}
	}
	for _, k := range []string{"é", "k\u00a0k", "k\u2003k", "k\ufeffk"} {
		if ValidKey(k) {
			t.Errorf("ValidKey(%q) = true, want false", k)
		}
	}
	if ValidKey("") || !ValidKey(strings.Repeat("k", MaxKeyLen)) || ValidKey(strings.Repeat("k", MaxKeyLen+1)) {
		t.Error("ValidKey's length bounds are not 1..MaxKeyLen")
	}
	if !ValidKey(NewAPIKey()) {
		t.Error("a minted key is refused")
	}
	if !strings.Contains(KeyRule, "printable ASCII") || !strings.Contains(KeyRule, "without whitespace") {
		t.Errorf("KeyRule %q does not say the rule", KeyRule)
	}
}

// TestRevoke: Revoke deletes a key's item and returns its tenant on every
// engine; a tenant the key is not of, and a key that is not there, revoke
// nothing (ErrKeyOtherTenant, ErrKeyNotFound); other keys stay.
func TestRevoke(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		keys := &DynamoKeys{Client: e.Client(), Table: e.CreateTable(t, "ApiKeysTable")}
		k1, k2 := NewAPIKey(), NewAPIKey()
		for _, k := range []string{k1, k2} {
			if err := keys.PutCredential(ctx, k, Credential{Tenant: "acme", Attrs: map[string]string{"worker": "w"}}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Revoke(ctx, e.Client(), keys.Table, HashKey(k1), "globex"); !errors.Is(err, ErrKeyOtherTenant) {
			t.Fatalf("another tenant: %v", err)
		}
		if _, ok, _ := keys.Tenant(ctx, HashKey(k1)); !ok {
			t.Fatal("a refused revoke deleted the key")
		}
		if tn, err := Revoke(ctx, e.Client(), keys.Table, HashKey(k1), "acme"); err != nil || tn != "acme" {
			t.Fatalf("revoke: %q %v", tn, err)
		}
		if tn, err := Revoke(ctx, e.Client(), keys.Table, HashKey(k2), ""); err != nil || tn != "acme" {
			t.Fatalf("revoke without a tenant: %q %v", tn, err)
		}
		for _, k := range []string{k1, k2} {
			if _, ok, err := keys.Tenant(ctx, HashKey(k)); ok || err != nil {
				t.Fatalf("a revoked key resolves: %v %v", ok, err)
			}
			if _, err := Revoke(ctx, e.Client(), keys.Table, HashKey(k), ""); !errors.Is(err, ErrKeyNotFound) {
				t.Fatalf("revoking again: %v", err)
			}
		}
		if !ValidHash(HashKey(k1)) || ValidHash("key#"+strings.Repeat("A", 64)) || ValidHash(strings.Repeat("a", 64)) || ValidHash(HashKey(k1)+"0") {
			t.Fatal("ValidHash is not HashKey's form")
		}
	})
}
