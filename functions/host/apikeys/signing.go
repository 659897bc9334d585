package apikeys

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/awserr"
	"github.com/idemkit/idemkit/internal/clock"
)

// A tenant's webhook signing secret (RED_TEAM 340) is one api-keys table
// item, {pk: "whsec#" + tenant, secret, previous?, previousUntil?,
// earlier?, rotatedAt}: secret and previous in their Standard Webhooks
// form ("whsec_" and the base64 of the key's bytes), previousUntil and
// rotatedAt in unix seconds; earlier (RED_TEAM 353) lists the replaced
// secrets older than previous still in their graces, newest first, each
// {secret, until}. The authorizer never names such an item (it
// reads "key#" items only); the executor's role may read only these.

// SigningItemPrefix starts the pk of every signing-secret item.
const SigningItemPrefix = "whsec#"

// secretPrefix starts a signing secret's written form.
const secretPrefix = "whsec_"

// minSecretBytes is the fewest key bytes a signing secret may hold.
const minSecretBytes = 24

// DefaultSecretCacheTTL is how long SigningSecrets reuses a tenant's read:
// a rotation (or a removal) reaches an executor's deliveries at most this
// long after it is written.
const DefaultSecretCacheTTL = time.Minute

// ErrRotatedConcurrently is returned by RotateSigningSecret when the
// tenant's secret changed between its read and its write (another
// rotation, a removal): nothing is written.
var ErrRotatedConcurrently = errors.New("host: the tenant's signing secret changed during the rotation")

// NewSigningSecret mints a signing secret: "whsec_" and the standard
// base64 of 32 random bytes.
func NewSigningSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("host: no randomness: " + err.Error())
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSigningSecret returns the key bytes of a signing secret written
// "whsec_" and the standard base64 of at least 24 bytes. Its error never
// quotes the secret.
func ParseSigningSecret(s string) ([]byte, error) {
	b64, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, errors.New("a signing secret starts with " + secretPrefix)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("a signing secret is " + secretPrefix + " and standard base64")
	}
	if len(b) < minSecretBytes {
		return nil, fmt.Errorf("a signing secret holds at least %d bytes, this one %d", minSecretBytes, len(b))
	}
	return b, nil
}

// signingKey is tenant's signing-secret item key.
func signingKey(tenant string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": sAV(SigningItemPrefix + tenant)}
}

// MaxPreviousSecrets bounds the replaced secrets an item keeps signing
// while their graces last (RED_TEAM 353): a rotation that would keep more
// is refused (*GraceLimitError).
const MaxPreviousSecrets = 4

// GraceLimitError refuses a rotation that would keep more than
// MaxPreviousSecrets replaced secrets signing: nothing is written.
type GraceLimitError struct {
	// Until is when the first of the kept graces ends (on an item a hand
	// edit left over the bound, when enough of them have ended): a
	// rotation with a grace is accepted from then on, one without a grace
	// at any time (RED_TEAM 357).
	Until time.Time
}

func (e *GraceLimitError) Error() string {
	return fmt.Sprintf("host: the tenant already keeps %d replaced signing secrets in their graces, the first ending at %s", MaxPreviousSecrets, e.Until.UTC().Format(time.RFC3339))
}

// Rotation is what RotateSigningSecret wrote.
type Rotation struct {
	// Secret is the new secret, to hand to the tenant's receiver once.
	Secret string
	// PreviousUntil is when the secret it replaced stops signing; zero
	// when none is kept (no secret before, no grace, or one that did not
	// parse).
	PreviousUntil time.Time
	// Earlier is when each secret replaced before it and still in its
	// grace stops signing, newest first: they keep signing too.
	Earlier []time.Time
	// Unchanged reports that the given secret already was the tenant's
	// current one: nothing was written.
	Unchanged bool
}

// prevSecret is one replaced secret an item keeps, and when its grace
// ends (unix seconds).
type prevSecret struct {
	secret string
	until  int64
}

// previousSecrets returns the replaced secrets item keeps, newest first:
// "previous" and "previousUntil" (the one every item written since
// RED_TEAM 340 may hold), then "earlier", a list of {secret, until} maps
// (RED_TEAM 353). An entry that is not a string and a number is an error.
func previousSecrets(item map[string]types.AttributeValue) ([]prevSecret, error) {
	return walkPrevious(item, true)
}

// wellFormedPrevious returns the replaced secrets of item that are well
// formed and parse (ParseSigningSecret), newest first, skipping any other:
// what a rotation keeps of a hand-edited item (RED_TEAM 356).
func wellFormedPrevious(item map[string]types.AttributeValue) []prevSecret {
	out, _ := walkPrevious(item, false)
	return out
}

// walkPrevious is previousSecrets (strict) or wellFormedPrevious.
func walkPrevious(item map[string]types.AttributeValue, strict bool) ([]prevSecret, error) {
	var out []prevSecret
	add := func(p prevSecret) {
		if !strict {
			if _, err := ParseSigningSecret(p.secret); err != nil {
				return
			}
		}
		out = append(out, p)
	}
	prev, ok := item["previous"].(*types.AttributeValueMemberS)
	until, uok := item["previousUntil"].(*types.AttributeValueMemberN)
	if ok && uok {
		u, err := strconv.ParseInt(until.Value, 10, 64)
		if err != nil && strict {
			return nil, errors.New("host: the stored signing secret's previousUntil is not a number")
		}
		if err == nil {
			add(prevSecret{prev.Value, u})
		}
	}
	earlier, _ := item["earlier"].(*types.AttributeValueMemberL)
	if earlier == nil {
		return out, nil
	}
	for _, v := range earlier.Value {
		m, _ := v.(*types.AttributeValueMemberM)
		if m == nil {
			if strict {
				return nil, errors.New("host: a stored earlier signing secret is not a map")
			}
			continue
		}
		s, sok := m.Value["secret"].(*types.AttributeValueMemberS)
		n, nok := m.Value["until"].(*types.AttributeValueMemberN)
		if !sok || !nok {
			if strict {
				return nil, errors.New("host: a stored earlier signing secret lacks its secret or its until")
			}
			continue
		}
		u, err := strconv.ParseInt(n.Value, 10, 64)
		if err != nil {
			if strict {
				return nil, errors.New("host: a stored earlier signing secret's until is not a number")
			}
			continue
		}
		add(prevSecret{s.Value, u})
	}
	return out, nil
}

// putPrevious writes prev, newest first, into item: the first as
// "previous" and "previousUntil" (so an executor of an earlier release
// still signs with it), the others as "earlier".
func putPrevious(item map[string]types.AttributeValue, prev []prevSecret) {
	if len(prev) == 0 {
		return
	}
	item["previous"] = sAV(prev[0].secret)
	item["previousUntil"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(prev[0].until, 10)}
	if len(prev) == 1 {
		return
	}
	l := make([]types.AttributeValue, 0, len(prev)-1)
	for _, p := range prev[1:] {
		l = append(l, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"secret": sAV(p.secret),
			"until":  &types.AttributeValueMemberN{Value: strconv.FormatInt(p.until, 10)},
		}})
	}
	item["earlier"] = &types.AttributeValueMemberL{Value: l}
}

// RotateSigningSecret gives tenant a new signing secret in the api-keys
// table and keeps the one it replaces signing until now+grace (none kept
// with grace 0), so deliveries carry both signatures while the receiver
// moves to the new one. Secrets replaced before it whose graces have not
// ended keep signing until theirs end (RED_TEAM 353); those whose graces
// ended are dropped, and so is every one that does not parse (RED_TEAM
// 356). A rotation that would keep more than
// MaxPreviousSecrets is refused (*GraceLimitError), never one without a
// grace. The new secret is secret when given (it must parse:
// ParseSigningSecret; the same secret written into another region's
// table), else a minted one (NewSigningSecret). One strongly consistent
// GetItem, then one PutItem conditional on the item being as read (else
// ErrRotatedConcurrently, after one more GetItem that finds the item is
// not this rotation's own write whose answer was lost). A PutItem that
// fails after a try that got no answer reads the item once more: the
// rotation is returned if it landed, else its error has ErrAnswerLost
// joined. The secret is returned once and never logged.
func RotateSigningSecret(ctx context.Context, c DynamoAPI, table, tenant, secret string, grace time.Duration, now time.Time) (Rotation, error) {
	if secret == "" {
		secret = NewSigningSecret()
	} else if _, err := ParseSigningSecret(secret); err != nil {
		return Rotation{}, err
	}
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: signingKey(tenant), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Rotation{}, fmt.Errorf("host: read the signing secret: %w", err)
	}
	rot := Rotation{Secret: secret}
	if old, ok := out.Item["secret"].(*types.AttributeValueMemberS); ok && old.Value == secret {
		rot.Unchanged = true // written before (another run of this rotation)
		return rot, nil
	}
	item := signingKey(tenant)
	item["secret"] = sAV(rot.Secret)
	item["rotatedAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Unix(), 10)}
	in := &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}
	if old, ok := out.Item["secret"].(*types.AttributeValueMemberS); ok {
		var prev, live []prevSecret
		// A secret that does not parse never signs (the executor refuses
		// the item): neither the current one nor a replaced one, nor an
		// entry a hand edit left without its until, is kept, and every
		// well-formed one in its grace is, so the rotation repairs the
		// item (RED_TEAM 356).
		if _, perr := ParseSigningSecret(old.Value); grace > 0 && perr == nil {
			rot.PreviousUntil = now.Add(grace).Truncate(time.Second)
			prev = append(prev, prevSecret{old.Value, rot.PreviousUntil.Unix()})
		}
		for _, p := range wellFormedPrevious(out.Item) {
			if p.until > now.Unix() {
				live = append(live, p)
			}
		}
		prev = append(prev, live...)
		// Only a grace adds a replaced secret: a rotation without one is
		// never refused, even of an item a hand edit left over the bound
		// (RED_TEAM 357). A refused one is accepted once enough graces
		// ended to leave room for its own.
		if grace > 0 && len(prev) > MaxPreviousSecrets {
			ends := make([]int64, 0, len(live))
			for _, p := range live {
				ends = append(ends, p.until)
			}
			slices.Sort(ends)
			return Rotation{}, &GraceLimitError{Until: time.Unix(ends[len(live)-MaxPreviousSecrets], 0)}
		}
		for _, p := range prev[len(prev)-len(live):] {
			rot.Earlier = append(rot.Earlier, time.Unix(p.until, 0))
		}
		putPrevious(item, prev)
		in.ConditionExpression = aws.String("#s = :old")
		in.ExpressionAttributeNames = map[string]string{"#s": "secret"}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":old": sAV(old.Value)}
	} else {
		in.ConditionExpression = aws.String("attribute_not_exists(pk)")
	}
	var tries awserr.Tries
	if _, err := c.PutItem(ctx, in, tries.Option); err != nil {
		if errors.As(err, new(*types.ConditionalCheckFailedException)) {
			// The item may be this rotation's own write: a PutItem that
			// landed and whose answer was lost is retried by the SDK, and
			// the retry's condition fails on the item the first try wrote.
			// Refusing it then would say "nothing written" of a secret
			// that signs and is never shown (RED_TEAM 347).
			if landed(ctx, c, table, tenant, item) {
				return rot, nil
			}
			return Rotation{}, ErrRotatedConcurrently
		}
		err = fmt.Errorf("host: write the signing secret: %w", err)
		if tries.Lost() {
			// A try got no answer and may have written the secret: read
			// back, it is returned (and shown) if it did; else the error
			// says it may have (RED_TEAM 366); not read when the last try
			// got no answer either (the engine does not answer).
			if !awserr.Unanswered(err) && landed(ctx, c, table, tenant, item) {
				return rot, nil
			}
			return Rotation{}, lostError{err}
		}
		return Rotation{}, err
	}
	return rot, nil
}

// landed reports whether tenant's signing-secret item is item as a
// rotation wrote it (its secret, and its replaced secrets and their
// graces, or none), read once strongly consistently. It runs only after
// the write's condition failed; a read that fails reports false.
func landed(ctx context.Context, c DynamoAPI, table, tenant string, item map[string]types.AttributeValue) bool {
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: signingKey(tenant), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return false
	}
	cur, _ := out.Item["secret"].(*types.AttributeValueMemberS)
	if cur == nil || cur.Value != item["secret"].(*types.AttributeValueMemberS).Value {
		return false
	}
	got, err := previousSecrets(out.Item)
	want, _ := previousSecrets(item)
	return err == nil && slices.Equal(got, want)
}

// SecretRemover is the subset of *dynamodb.Client RemoveSigningSecret uses.
type SecretRemover interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// RemoveSigningSecret deletes tenant's signing secrets (the current one
// and any replaced one in its grace): its deliveries are sent unsigned
// once an executor's cache has let go of them (DefaultSecretCacheTTL).
// found is false when the tenant had none. One strongly consistent
// GetItem (none found: nothing more), then one DeleteItem: the read, not
// the delete's answer, says whether there was one, since a delete that
// landed and whose answer was lost is retried by the SDK and the retry
// finds nothing (RED_TEAM 354). A DeleteItem that fails after a try that
// got no answer reads the item once more: gone, it was removed; else the
// error has ErrAnswerLost joined.
func RemoveSigningSecret(ctx context.Context, c SecretRemover, table, tenant string) (found bool, err error) {
	out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: signingKey(tenant), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("pk")})
	if err != nil {
		return false, fmt.Errorf("host: read the signing secret: %w", err)
	}
	if len(out.Item) == 0 {
		return false, nil
	}
	var tries awserr.Tries
	if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: signingKey(tenant)}, tries.Option); err != nil {
		err = fmt.Errorf("host: delete the signing secret: %w", err)
		if !tries.Lost() {
			return false, err
		}
		// A try got no answer and may have deleted it: read back
		// (RED_TEAM 366), unless the last try got no answer either.
		if awserr.Unanswered(err) {
			return false, lostError{err}
		}
		out, gerr := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: signingKey(tenant), ConsistentRead: aws.Bool(true),
			ProjectionExpression: aws.String("pk")})
		if gerr == nil && len(out.Item) == 0 {
			return true, nil
		}
		return false, lostError{err}
	}
	return true, nil
}

// SigningSecrets reads the tenants' signing secrets from the api-keys table
// for the webhook (webhook.SigningSecrets): one strongly consistent GetItem
// per tenant per TTL in each process, a tenant without a secret cached as
// such. Safe for concurrent use.
type SigningSecrets struct {
	// Client is the DynamoDB client. Required.
	Client DynamoAPI
	// Table is the api-keys table. Required.
	Table string
	// TTL is how long a read is reused. Default DefaultSecretCacheTTL.
	TTL time.Duration
	// Now is the clock. Default the system clock.
	Now func() time.Time

	mu    sync.Mutex
	cache map[string]cachedSecrets
}

// cachedSecrets is one tenant's read.
type cachedSecrets struct {
	current  []byte
	previous []cachedPrevious // newest first
	readAt   time.Time
}

// cachedPrevious is a replaced secret's key bytes and when its grace ends.
type cachedPrevious struct {
	key   []byte
	until time.Time
}

// maxCachedTenants bounds the cache; a full cache starts over.
const maxCachedTenants = 4096

// WebhookSecrets returns tenant's key bytes, the current secret first, then
// each replaced one whose grace lasts, newest first (RED_TEAM 353); none when the tenant has no
// secret. A stored secret that does not parse is an error (nothing is
// sent unsigned in its place); the error never quotes it.
func (s *SigningSecrets) WebhookSecrets(ctx context.Context, tenant string) ([][]byte, error) {
	now := s.now()
	ttl := s.TTL
	if ttl <= 0 {
		ttl = DefaultSecretCacheTTL
	}
	s.mu.Lock()
	c, ok := s.cache[tenant]
	s.mu.Unlock()
	if !ok || now.Sub(c.readAt) >= ttl || now.Before(c.readAt) {
		var err error
		if c, err = s.read(ctx, tenant, now); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.cache == nil || len(s.cache) >= maxCachedTenants {
			s.cache = map[string]cachedSecrets{}
		}
		s.cache[tenant] = c
		s.mu.Unlock()
	}
	if c.current == nil {
		return nil, nil
	}
	keys := [][]byte{c.current}
	for _, p := range c.previous {
		if now.Before(p.until) {
			keys = append(keys, p.key)
		}
	}
	return keys, nil
}

func (s *SigningSecrets) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return clock.System{}.Now()
}

// read is one GetItem of tenant's item.
func (s *SigningSecrets) read(ctx context.Context, tenant string, now time.Time) (cachedSecrets, error) {
	out, err := s.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table), Key: signingKey(tenant), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return cachedSecrets{}, fmt.Errorf("host: read the signing secret: %w", err)
	}
	c := cachedSecrets{readAt: now}
	cur, ok := out.Item["secret"].(*types.AttributeValueMemberS)
	if !ok {
		return c, nil
	}
	if c.current, err = ParseSigningSecret(cur.Value); err != nil {
		return cachedSecrets{}, fmt.Errorf("host: the stored signing secret is malformed: %w", err)
	}
	prev, err := previousSecrets(out.Item)
	if err != nil {
		return cachedSecrets{}, err
	}
	for _, p := range prev {
		if !now.Before(time.Unix(p.until, 0)) {
			continue // its grace ended: it signs nothing, so refuses nothing (RED_TEAM 356)
		}
		k, err := ParseSigningSecret(p.secret)
		if err != nil {
			return cachedSecrets{}, fmt.Errorf("host: a stored previous signing secret is malformed: %w", err)
		}
		c.previous = append(c.previous, cachedPrevious{k, time.Unix(p.until, 0)})
	}
	return c, nil
}
