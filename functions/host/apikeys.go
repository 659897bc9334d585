package host

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// API keys are stored only as SHA-256 hashes: the ApiKeysTable item is
// {pk: "key#" + hex(sha256(key)), tenant}. A leaked table names no usable key.

// ErrKeyExists is returned by PutKey when the key is already registered.
var ErrKeyExists = errors.New("host: api key already registered")

// HashKey returns the stored form of an API key: "key#" + hex SHA-256.
func HashKey(key string) string {
	s := sha256.Sum256([]byte(key))
	return "key#" + hex.EncodeToString(s[:])
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

// KeyStore resolves API keys to tenants.
type KeyStore interface {
	// Tenant returns the tenant of the key whose HashKey is hash; ok is
	// false for an unknown key.
	Tenant(ctx context.Context, hash string) (tenant string, ok bool, err error)
	// PutKey registers key for tenant (ErrKeyExists if already registered).
	PutKey(ctx context.Context, key, tenant string) error
}

// MemKeys is an in-memory KeyStore, safe for concurrent use.
type MemKeys struct {
	mu sync.Mutex
	m  map[string]string
}

// NewMemKeys returns an empty MemKeys.
func NewMemKeys() *MemKeys { return &MemKeys{m: map[string]string{}} }

// Tenant implements KeyStore.
func (k *MemKeys) Tenant(_ context.Context, hash string) (string, bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	t, ok := k.m[hash]
	return t, ok, nil
}

// PutKey implements KeyStore.
func (k *MemKeys) PutKey(_ context.Context, key, tenant string) error {
	if !ValidTenant(tenant) {
		return fmt.Errorf("host: tenant %q does not match the tenantId grammar", tenant)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h := HashKey(key)
	if _, ok := k.m[h]; ok {
		return ErrKeyExists
	}
	k.m[h] = tenant
	return nil
}

// DynamoKeys is the ApiKeysTable KeyStore.
type DynamoKeys struct {
	// Client is the DynamoDB client. Required.
	Client DynamoAPI
	// Table is the ApiKeysTable name. Required.
	Table string
}

// Tenant implements KeyStore: one GetItem (eventually consistent: a key is
// usable moments after it is created).
func (d *DynamoKeys) Tenant(ctx context.Context, hash string) (string, bool, error) {
	out, err := d.Client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(d.Table),
		Key:       map[string]types.AttributeValue{"pk": sAV(hash)},
	})
	if err != nil {
		return "", false, fmt.Errorf("host: get api key: %w", err)
	}
	t, ok := out.Item["tenant"].(*types.AttributeValueMemberS)
	if !ok || t.Value == "" {
		return "", false, nil
	}
	return t.Value, true, nil
}

// PutKey implements KeyStore: a PutItem conditional on the hash being new.
func (d *DynamoKeys) PutKey(ctx context.Context, key, tenant string) error {
	if !ValidTenant(tenant) {
		return fmt.Errorf("host: tenant %q does not match the tenantId grammar", tenant)
	}
	cond, err := expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name("pk"))).Build()
	if err != nil {
		return err
	}
	_, err = d.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:           aws.String(d.Table),
		Item:                map[string]types.AttributeValue{"pk": sAV(HashKey(key)), "tenant": sAV(tenant)},
		ConditionExpression: cond.Condition(), ExpressionAttributeNames: cond.Names(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ErrKeyExists
	}
	if err != nil {
		return fmt.Errorf("host: put api key: %w", err)
	}
	return nil
}
