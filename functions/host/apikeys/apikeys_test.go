package apikeys

import (
	"context"
	"errors"
	"fmt"
	"net"
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

// TestRevokeWhoseAnswerWasLostSaysSo (RED_TEAM 364): a revoke whose delete
// landed and whose answer was lost, retried by the SDK, returns
// ErrKeyNotFound with ErrAnswerLost joined (the key is gone; the lost try
// may have deleted it), and so does one that then fails, reading the key
// back (RED_TEAM 366); that read failing too, its error with ErrAnswerLost; a throttled try or a connection never made is no lost
// answer, and another tenant's key is ErrKeyOtherTenant alone, kept. A
// revoke that succeeds costs one DeleteItem, as before. On the emulators.
func TestRevokeWhoseAnswerWasLostSaysSo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		keys := &DynamoKeys{Client: e.Client(), Table: e.CreateTable(t, "ApiKeysTable")}
		mint := func(tenant string) string {
			t.Helper()
			k := NewAPIKey()
			if err := keys.PutKey(ctx, k, tenant); err != nil {
				t.Fatal(err)
			}
			return k
		}
		gone := func(k string) bool {
			t.Helper()
			_, ok, err := keys.Tenant(ctx, HashKey(k))
			if err != nil {
				t.Fatal(err)
			}
			return !ok
		}
		revoke := func(k, tenant string, arm func(f *dynamotest.Faults)) (string, *dynamotest.Counter, error) {
			t.Helper()
			f, n := dynamotest.NewFaults(), dynamotest.NewCounter()
			arm(f)
			tn, err := Revoke(ctx, e.Client(dynamotest.FastRetries, n.Middleware(), f.Middleware()), keys.Table, HashKey(k), tenant)
			if f.Pending() != 0 {
				t.Fatalf("%d faults not fired", f.Pending())
			}
			return tn, n, err
		}
		lost := func(n int) func(f *dynamotest.Faults) {
			return func(f *dynamotest.Faults) { f.FailNextAfterSend("DeleteItem", n, dynamotest.ResponseLost()) }
		}
		for _, n := range []int{1, 2} {
			k := mint("acme")
			if tn, _, err := revoke(k, "acme", lost(n)); tn != "" || !errors.Is(err, ErrKeyNotFound) || !errors.Is(err, ErrAnswerLost) || !gone(k) {
				t.Fatalf("lost %d times: %q, %v, gone %v; want ErrKeyNotFound with ErrAnswerLost, the key gone", n, tn, err, gone(k))
			}
		}
		k := mint("acme")
		_, _, err := revoke(k, "", func(f *dynamotest.Faults) {
			lost(1)(f)
			f.FailNext("DeleteItem", 2, dynamotest.Throttle())
		})
		if !errors.Is(err, ErrAnswerLost) || !errors.Is(err, ErrKeyNotFound) || !gone(k) {
			t.Fatalf("lost then throttled: %v; want ErrKeyNotFound with ErrAnswerLost (read back)", err)
		}
		k = mint("acme")
		_, _, err = revoke(k, "", func(f *dynamotest.Faults) {
			lost(1)(f)
			f.FailNext("DeleteItem", 2, dynamotest.Throttle())
			f.FailNext("GetItem", 3, dynamotest.Throttle())
		})
		if !errors.Is(err, ErrAnswerLost) || errors.Is(err, ErrKeyNotFound) || !strings.Contains(err.Error(), "ProvisionedThroughputExceeded") || strings.Contains(err.Error(), ErrAnswerLost.Error()) || !gone(k) {
			t.Fatalf("lost then throttled, the read too: %v; want the throttle, in its own words, with ErrAnswerLost", err)
		}
		// Lost on every try: the engine does not answer, and no read waits
		// on it again.
		k = mint("acme")
		_, n, err := revoke(k, "", lost(3))
		if !errors.Is(err, ErrAnswerLost) || errors.Is(err, ErrKeyNotFound) || n.CallOps()["GetItem"] != 0 {
			t.Fatalf("lost on every try: %v, calls %v; want ErrAnswerLost, no read", err, n.CallOps())
		}
		for name, arm := range map[string]func(f *dynamotest.Faults){
			"nothing":   func(*dynamotest.Faults) {},
			"throttled": func(f *dynamotest.Faults) { f.FailNext("DeleteItem", 1, dynamotest.Throttle()) },
			"not connected": func(f *dynamotest.Faults) {
				f.FailNext("DeleteItem", 1, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
			},
		} {
			if _, _, err := revoke(k, "", arm); !errors.Is(err, ErrKeyNotFound) || errors.Is(err, ErrAnswerLost) {
				t.Fatalf("%s, a key not there: %v; want ErrKeyNotFound alone", name, err)
			}
			k2 := mint("acme")
			tn, n, err := revoke(k2, "", arm)
			if err != nil || tn != "acme" || !gone(k2) || n.Calls() != 1 || n.CallOps()["DeleteItem"] != 1 {
				t.Fatalf("%s, a key there: %q, %v, calls %v; want acme, one DeleteItem", name, tn, err, n.CallOps())
			}
		}
		k = mint("globex")
		if tn, _, err := revoke(k, "acme", lost(1)); tn != "globex" || !errors.Is(err, ErrKeyOtherTenant) || errors.Is(err, ErrAnswerLost) || gone(k) {
			t.Fatalf("another tenant's key, the answer lost: %q, %v, gone %v; want ErrKeyOtherTenant alone, kept", tn, err, gone(k))
		}
	})
}

// TestMintedKey: MintedKey accepts every key NewAPIKey mints and nothing
// else of the key rule: another prefix, a length other than 32 base64url
// characters, a character outside base64url.
func TestMintedKey(t *testing.T) {
	for i := 0; i < 100; i++ {
		if k := NewAPIKey(); !MintedKey(k) {
			t.Fatalf("a minted key is refused")
		}
	}
	k := NewAPIKey()
	for _, bad := range []string{"", "idk_", k[:len(k)-1], k + "A", "IDK_" + k[4:], "idx_" + k[4:], k[:len(k)-1] + "=", k[:len(k)-1] + "+", k[:len(k)-1] + "/", "k-acme-0123456789"} {
		if MintedKey(bad) {
			t.Errorf("MintedKey(%q) = true", bad)
		}
	}
}
