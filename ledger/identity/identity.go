package identity

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/idemkit/idemkit/internal/ids"
)

// ErrInvalid is matched (errors.Is) by every identity input error.
var ErrInvalid = errors.New("ledger: invalid effect identity input")

// Keying says how an effect identity was derived; the values are the
// OpenWOP witness vocabulary (`keying`).
type Keying string

const (
	// KeyingBusinessIdentity: the identity is derived from the business
	// operation (the rule).
	KeyingBusinessIdentity Keying = "business-identity"
	// KeyingActivityRecipe: the identity is the activity recipe v2 (the
	// fallback for a provider with no business key).
	KeyingActivityRecipe Keying = "activity-recipe"
)

// Identity recipe stamps. Every ledger record carries the recipe that made its
// identity, and runs stamp ActivityRecipe (see Stamps). A reader never
// recomputes a recorded identity with another recipe: it uses the recorded
// effectId as is.
const (
	// ActivityRecipe is the logical effect identity v2 (activity identity v2).
	ActivityRecipe = "openwop-activity-v2"
	// BusinessRecipe is idemkit's business identity recipe, v1.
	BusinessRecipe = "idemkit-business-v1"
	// ProviderKeyRecipe is the derivation of the provider idempotency key from
	// the effectId (see Identity.ProviderKey).
	ProviderKeyRecipe = "idemkit-provider-key-v1"
)

// Identity is an effect's stable identity. It never contains the attempt.
type Identity struct {
	// EffectID is tenant-bound, `<tenant>/<opaque>` (ids.schema.json
	// effectId), the opaque part being 43 base64url characters.
	EffectID string
	// Tenant is the tenant segment of EffectID.
	Tenant string
	// Keying says which recipe made EffectID.
	Keying Keying
	// Recipe is the identity recipe stamp (ActivityRecipe or
	// BusinessRecipe).
	Recipe string
	// InvocationID is the activity identity v2 logicalInvocationId for the activity
	// recipe (the opaque part of EffectID); empty for a business identity.
	InvocationID string
	// ProviderKey is the idempotency key sent to the provider
	// (`Idempotency-Key`), a documented deterministic derivative of EffectID:
	//
	//	"idemkit-" || base64url-nopad(sha256("idemkit:provider-key:v1\x00" || EffectID))
	//
	// 51 characters matching ^[A-Za-z0-9._~-]{22,128}$ (the OpenWOP key
	// grammar), the same on every attempt, tenant-bound through EffectID, and
	// redaction-safe: it reveals neither the effectId nor any business input.
	ProviderKey string
}

// Activity is the input of the activity recipe v2 (activity identity v2).
type Activity struct {
	// Tenant is the authenticated tenant (tenantId grammar). Required.
	Tenant string
	// RunID is the run's id, as the host writes it. Required.
	RunID string
	// NodeID is the node's id. Required.
	NodeID string
	// Ordinal is the logicalInvocationOrdinal: assigned once when the logical
	// activity is created, never changed across retries, different for
	// different logical invocations of the same node. Hashed as its decimal
	// string.
	Ordinal uint64
	// Provider is the activity identity v2 `providerKey` input: the name of the provider (or
	// provider operation) the activity calls, e.g. "stripe". May be empty.
	Provider string
}

// Business is the input of a business identity: the business operation and
// its own key, bound to the tenant. It has no field for a run, node, ordinal
// or attempt, so the identity is stable across every entry point.
type Business struct {
	// Tenant is the authenticated tenant (tenantId grammar). Required.
	Tenant string
	// Operation names the business operation, e.g. "refund". Required.
	Operation string
	// Key is the operation's business key, e.g. "order-123/refund-1".
	// Required.
	Key string
}

func checkField(name, v string, required bool) error {
	if required && v == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalid, name)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: %s contains NUL", ErrInvalid, name)
	}
	return nil
}

func checkTenant(t string) error {
	if err := checkField("tenant", t, true); err != nil {
		return err
	}
	if !ids.ValidTenant(t) {
		return fmt.Errorf("%w: tenant does not match the tenantId grammar", ErrInvalid)
	}
	if strings.IndexByte(t, '~') >= 0 {
		// ids.schema.json (the OpenWOP id path projection): a host must not mint a
		// tenant-bound id containing '~', the path projection's escape
		// marker; an effectId is tenant + "/" + opaque.
		return fmt.Errorf("%w: tenant contains '~' (no tenant-bound id containing '~' may be minted)", ErrInvalid)
	}
	return nil
}

func hashOpaque(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// FromActivity computes the activity recipe v2 (activity identity v2):
//
//	base64url(sha256("openwop:activity:v2\0" || tenant || "\0" || runId ||
//	  "\0" || nodeId || "\0" || ordinal || "\0" || providerKey))
//
// with the ordinal as a decimal string and base64url without padding. A NUL
// inside any field is rejected (it would make two inputs collide), as is an
// empty tenant, run or node. The result's EffectID is tenant + "/" + the hash.
func FromActivity(a Activity) (Identity, error) {
	if err := checkTenant(a.Tenant); err != nil {
		return Identity{}, err
	}
	for _, f := range []struct {
		n, v string
		req  bool
	}{{"runId", a.RunID, true}, {"nodeId", a.NodeID, true}, {"providerKey", a.Provider, false}} {
		if err := checkField(f.n, f.v, f.req); err != nil {
			return Identity{}, err
		}
	}
	opaque := hashOpaque("openwop:activity:v2", a.Tenant, a.RunID, a.NodeID,
		strconv.FormatUint(a.Ordinal, 10), a.Provider)
	return newIdentity(a.Tenant, opaque, KeyingActivityRecipe, ActivityRecipe, opaque), nil
}

// FromBusiness computes a business identity (recipe idemkit-business-v1):
//
//	base64url(sha256("idemkit:business:v1\0" || tenant || "\0" || operation || "\0" || key))
//
// base64url without padding; NUL inside any field and empty fields are
// rejected. Two runs, or a run and an API entry point, reaching the same
// (tenant, operation, key) get the same identity and so fire once.
func FromBusiness(b Business) (Identity, error) {
	if err := checkTenant(b.Tenant); err != nil {
		return Identity{}, err
	}
	if err := checkField("operation", b.Operation, true); err != nil {
		return Identity{}, err
	}
	if err := checkField("key", b.Key, true); err != nil {
		return Identity{}, err
	}
	opaque := hashOpaque("idemkit:business:v1", b.Tenant, b.Operation, b.Key)
	return newIdentity(b.Tenant, opaque, KeyingBusinessIdentity, BusinessRecipe, ""), nil
}

func newIdentity(tenant, opaque string, k Keying, recipe, inv string) Identity {
	id := tenant + "/" + opaque
	return Identity{EffectID: id, Tenant: tenant, Keying: k, Recipe: recipe, InvocationID: inv, ProviderKey: ProviderKey(id)}
}

// ProviderKey returns the provider idempotency key of an effectId (see
// Identity.ProviderKey). It depends on the effectId only.
func ProviderKey(effectID string) string {
	return providerKeyPrefix + hashOpaque(providerKeyDomain, effectID)
}

// providerKeyPrefix and providerKeyDomain are ProviderKey's prefix and
// hash domain.
const (
	providerKeyPrefix = "idemkit-"
	providerKeyDomain = "idemkit:provider-key:v1"
)

// isProviderKeyOf reports whether key is ProviderKey(effectID), without
// building the key: Validate runs on every Do and Replay, a duplicate's
// included, so it allocates nothing for an effectId of usual length.
func isProviderKeyOf(key, effectID string) bool {
	var buf [256]byte
	b := append(append(append(buf[:0], providerKeyDomain...), 0), effectID...)
	sum := sha256.Sum256(b)
	var enc [43]byte // base64url without padding of 32 bytes
	base64.RawURLEncoding.Encode(enc[:], sum[:])
	return len(key) == len(providerKeyPrefix)+len(enc) &&
		key[:len(providerKeyPrefix)] == providerKeyPrefix &&
		key[len(providerKeyPrefix):] == string(enc[:])
}

// Validate checks an Identity built by hand (e.g. from a recorded
// effectId): the effectId grammar, its binding to Tenant, a known Keying, a
// recipe stamp, and the provider key: the effectId's own (ProviderKey), so
// that no two effects, and no effect and a caller's Idempotency-Key, share
// one. A failure matches ErrInvalid.
func (id Identity) Validate() error {
	if !ids.ValidEffectID(id.EffectID) {
		return fmt.Errorf("%w: effectId does not match <tenant>/<opaque>", ErrInvalid)
	}
	if !strings.HasPrefix(id.EffectID, id.Tenant+"/") {
		return fmt.Errorf("%w: effectId is not bound to tenant", ErrInvalid)
	}
	if id.Keying != KeyingBusinessIdentity && id.Keying != KeyingActivityRecipe {
		return fmt.Errorf("%w: unknown keying %q", ErrInvalid, id.Keying)
	}
	if id.Recipe == "" {
		return fmt.Errorf("%w: identity recipe stamp is empty", ErrInvalid)
	}
	if !ids.ValidKey(id.ProviderKey) {
		return fmt.Errorf("%w: provider key outside %s", ErrInvalid, ids.KeyGrammar)
	}
	if !isProviderKeyOf(id.ProviderKey, id.EffectID) {
		// Any other key, however well formed, may be another effect's
		// (the provider would take one effect for the other's duplicate)
		// or a caller's Idempotency-Key (a caller's keyspace).
		return fmt.Errorf("%w: provider key is not the effectId's own (%s)", ErrInvalid, ProviderKeyRecipe)
	}
	return nil
}
