package apikeys

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/awserr"
)

// ErrKeyExists is returned by PutKey when the key is already registered.
var ErrKeyExists = errors.New("host: api key already registered")

// HashKey returns the stored form of an API key: "key#" + hex SHA-256.
func HashKey(key string) string {
	s := sha256.Sum256([]byte(key))
	return "key#" + hex.EncodeToString(s[:])
}

// MaxKeyLen is the longest API key the authorizer accepts, in bytes.
const MaxKeyLen = 512

// KeyRule says in words which API keys ValidKey accepts.
const KeyRule = "1..512 printable ASCII characters without whitespace"

// ValidKey reports whether key can be an API key: 1..MaxKeyLen bytes, each
// printable ASCII and not a space (0x21..0x7e), so no whitespace of any
// kind (\v, \f and Unicode spaces included), no control character, NUL or
// DEL, and no non-ASCII. It is the one rule of the authorizer, which reads
// the key of "Authorization: Bearer KEY" through it, and of `idemkit dev
// --api-key`, which refuses a key no request could present. A minted key
// (NewAPIKey) passes it.
func ValidKey(key string) bool {
	if key == "" || len(key) > MaxKeyLen {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

// NewAPIKey mints an API key: "idk_" + 32 base64url characters (192 random
// bits).
func NewAPIKey() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic("host: no randomness: " + err.Error())
	}
	return "idk_" + base64.RawURLEncoding.EncodeToString(b)
}

// MintedKey reports whether key has the form NewAPIKey mints: "idk_" and
// 32 base64url characters. A key of that form carries 192 random bits
// when NewAPIKey made it, which is what makes its unsalted stored hash
// (HashKey) safe to keep.
func MintedKey(key string) bool {
	b64, ok := strings.CutPrefix(key, "idk_")
	if !ok || len(b64) != 32 {
		return false
	}
	_, err := base64.RawURLEncoding.Strict().DecodeString(b64)
	return err == nil
}

// KeyStore resolves API keys to tenants.
type KeyStore interface {
	// Tenant returns the tenant of the key whose HashKey is hash; ok is
	// false for an unknown key.
	Tenant(ctx context.Context, hash string) (tenant string, ok bool, err error)
	// PutKey registers key for tenant (ErrKeyExists if already registered).
	PutKey(ctx context.Context, key, tenant string) error
}

// CredentialStore is a KeyStore whose keys carry credential attributes
// beside the tenant (Credential.Attrs): the values a policy scopes keys by
// (the commerce policy's namespace and worker, the ERP policy's client,
// company and organisation), which the authorizer passes to the api
// function in its context. MemKeys and DynamoKeys implement it.
type CredentialStore interface {
	KeyStore
	// Credential returns the credential of the key whose HashKey is hash;
	// ok is false for an unknown key.
	Credential(ctx context.Context, hash string) (c Credential, ok bool, err error)
	// PutCredential registers key for c (ErrKeyExists if already
	// registered); c must be valid (Credential.Validate).
	PutCredential(ctx context.Context, key string, c Credential) error
}

// MemKeys is an in-memory CredentialStore, safe for concurrent use.
type MemKeys struct {
	mu sync.Mutex
	m  map[string]Credential
}

var _ CredentialStore = (*MemKeys)(nil)

// NewMemKeys returns an empty MemKeys.
func NewMemKeys() *MemKeys { return &MemKeys{m: map[string]Credential{}} }

// Tenant implements KeyStore.
func (k *MemKeys) Tenant(ctx context.Context, hash string) (string, bool, error) {
	c, ok, err := k.Credential(ctx, hash)
	return c.Tenant, ok, err
}

// Credential implements CredentialStore.
func (k *MemKeys) Credential(_ context.Context, hash string) (Credential, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.m[hash]
	return c.clone(), ok, nil
}

// PutKey implements KeyStore: a key without attributes.
func (k *MemKeys) PutKey(ctx context.Context, key, tenant string) error {
	return k.PutCredential(ctx, key, Credential{Tenant: tenant})
}

// PutCredential implements CredentialStore.
func (k *MemKeys) PutCredential(_ context.Context, key string, c Credential) error {
	if err := c.Validate(); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h := HashKey(key)
	if _, ok := k.m[h]; ok {
		return ErrKeyExists
	}
	k.m[h] = c.clone()
	return nil
}

// DynamoKeys is the ApiKeysTable KeyStore.
type DynamoKeys struct {
	// Client is the DynamoDB client. Required.
	Client DynamoAPI
	// Table is the ApiKeysTable name. Required.
	Table string
}

var _ CredentialStore = (*DynamoKeys)(nil)

// Tenant implements KeyStore: one strongly consistent GetItem, so a key
// is usable as soon as it is created and refused as soon as it is deleted
// (revoked): a revoked key lives no longer than the authorizer's cache.
func (d *DynamoKeys) Tenant(ctx context.Context, hash string) (string, bool, error) {
	c, ok, err := d.Credential(ctx, hash)
	return c.Tenant, ok, err
}

// Credential implements CredentialStore: one GetItem, as Tenant. The
// attributes are the item's attrs map (string values; others are ignored).
func (d *DynamoKeys) Credential(ctx context.Context, hash string) (Credential, bool, error) {
	out, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.Table),
		Key:            map[string]types.AttributeValue{"pk": sAV(hash)},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Credential{}, false, fmt.Errorf("host: get api key: %w", err)
	}
	t, ok := out.Item["tenant"].(*types.AttributeValueMemberS)
	if !ok || t.Value == "" {
		return Credential{}, false, nil
	}
	c := Credential{Tenant: t.Value}
	if m, ok := out.Item["attrs"].(*types.AttributeValueMemberM); ok {
		for k, av := range m.Value {
			if s, ok := av.(*types.AttributeValueMemberS); ok {
				if c.Attrs == nil {
					c.Attrs = map[string]string{}
				}
				c.Attrs[k] = s.Value
			}
		}
	}
	return c, true, nil
}

// PutKey implements KeyStore: a key without attributes.
func (d *DynamoKeys) PutKey(ctx context.Context, key, tenant string) error {
	return d.PutCredential(ctx, key, Credential{Tenant: tenant})
}

// PutCredential implements CredentialStore: a PutItem conditional on the
// hash being new. One that fails after a try that got no answer reads the
// item once: holding c, the key was stored (nil); holding another
// credential, ErrKeyExists; else (none there, or the read failed) the
// error with ErrAnswerLost joined.
func (d *DynamoKeys) PutCredential(ctx context.Context, key string, c Credential) error {
	if err := c.Validate(); err != nil {
		return err
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	if err != nil {
		return err
	}
	item := map[string]types.AttributeValue{"pk": sAV(HashKey(key)), "tenant": sAV(c.Tenant)}
	if len(c.Attrs) > 0 {
		m := make(map[string]types.AttributeValue, len(c.Attrs))
		for k, v := range c.Attrs {
			m[k] = sAV(v)
		}
		item["attrs"] = &types.AttributeValueMemberM{Value: m}
	}
	var tries awserr.Tries
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(d.Table),
		Item:                item,
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	}, tries.Option)
	if err != nil && tries.Lost() {
		// A try got no answer and may have stored the key: the SDK's
		// retry is then refused by the condition on this very write, or
		// fails. The item read back says whether it did (RED_TEAM 365).
		// Not when the last try got no answer either: the engine does not
		// answer, and the read would wait as long again.
		stored, rerr := false, err
		if !awserr.Unanswered(err) {
			stored, rerr = d.stored(ctx, HashKey(key), c)
		}
		switch {
		case stored:
			return nil
		case rerr == nil && errors.As(err, new(*types.ConditionalCheckFailedException)):
			return ErrKeyExists // another credential holds the hash
		}
		return lostError{fmt.Errorf("host: put api key: %w", err)}
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrKeyExists
	}
	if err != nil {
		return fmt.Errorf("host: put api key: %w", err)
	}
	return nil
}

// stored reports whether the item of hash holds credential c, read once,
// or the read's error.
func (d *DynamoKeys) stored(ctx context.Context, hash string, c Credential) (bool, error) {
	got, ok, err := d.Credential(ctx, hash)
	return err == nil && ok && got.Tenant == c.Tenant && maps.Equal(got.Attrs, c.Attrs), err
}

// DynamoAPI is the subset of *dynamodb.Client DynamoKeys uses.
type DynamoAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

func sAV(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
