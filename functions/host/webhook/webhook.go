package webhook

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/jcs"
	"github.com/idemkit/idemkit/ledger"
)

// ErrDestinationRefused is returned (wrapped) for a webhook destination the
// policy refuses, at createRun and again at connect time.
var ErrDestinationRefused = errors.New("webhook destination refused")

// WebhookPolicy is the webhook workflow's destination allowlist. The zero
// value allows any public http(s) host and refuses loopback, private,
// link-local (including the instance metadata address), unspecified and
// multicast addresses. The check runs on the URL at createRun and on the
// resolved IP at every connection (so a DNS answer cannot smuggle a refused
// address in).
type WebhookPolicy struct {
	// Allow lists allowed hosts: "example.com" (exactly) or "*.example.com"
	// (any subdomain). Default empty: any host, subject to the IP rules.
	// Env WEBHOOK_ALLOWLIST (comma-separated).
	Allow []string
	// AllowLoopback admits loopback destinations (127.0.0.0/8, ::1,
	// localhost). Default false; `idemkit dev --allow-loopback-webhooks`
	// sets it. Env WEBHOOK_ALLOW_LOOPBACK.
	AllowLoopback bool
	// AllowPrivate admits private (RFC 1918, fc00::/7) destinations, e.g.
	// inside a VPC. Default false. Env WEBHOOK_ALLOW_PRIVATE.
	AllowPrivate bool
}

// loopbackRefused says why a loopback destination is refused and what
// admits one.
const loopbackRefused = "loopback destinations are refused (the host's WEBHOOK_ALLOW_LOOPBACK setting admits them; `idemkit dev --allow-loopback-webhooks` sets it)"

// CheckURL checks a destination URL: http or https, no user info, a port
// (if any) in 1..65535, a host allowed by Allow, and, when the host is an
// IP literal or "localhost", an address the IP rules admit. A host is
// checked without the trailing dot of its absolute form, and one a URL
// parser reads as an IPv4 address (its last label a number) only when it
// is four decimal numbers. A host must be ASCII: net/http maps another
// through IDNA before dialing it ("１２７.０.０.１" is 127.0.0.1), so an
// internationalized name is written in its xn-- form.
func (p *WebhookPolicy) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: inputs.url must be an absolute http or https URL", ErrDestinationRefused)
	}
	if u.User != nil {
		return fmt.Errorf("%w: inputs.url must not carry credentials", ErrDestinationRefused)
	}
	// A host written in its absolute form (a trailing dot) names the same
	// host: it is checked without the dot.
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return fmt.Errorf("%w: inputs.url must be an absolute http or https URL", ErrDestinationRefused)
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r >= utf8.RuneSelf }) {
		// net/http maps such a host through IDNA (UTS #46) before it
		// resolves it: fullwidth digits and letters and ideographic full
		// stops spell the addresses and names refused here in ASCII.
		return fmt.Errorf("%w: the host in inputs.url must be ASCII (an internationalized name in its xn-- form)", ErrDestinationRefused)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%w: inputs.url has a port outside 1..65535", ErrDestinationRefused)
		}
	}
	if !strings.Contains(host, ":") && endsInNumber(host) {
		// A URL parser reads such a host as an IPv4 address ("127.1",
		// "0x7f000001", "2130706433"), and resolvers disagree on those
		// forms: only four decimal numbers are taken, and checked.
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is4() {
			return fmt.Errorf("%w: an IPv4 address in inputs.url must be four decimal numbers (a.b.c.d)", ErrDestinationRefused)
		}
	}
	if len(p.Allow) > 0 && !p.hostAllowed(host) {
		return fmt.Errorf("%w: host %q is not on the allowlist", ErrDestinationRefused, host)
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		if !p.AllowLoopback {
			return fmt.Errorf("%w: %s", ErrDestinationRefused, loopbackRefused)
		}
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.CheckIP(ip)
	}
	return nil
}

// endsInNumber reports whether host's last label is a number, decimal or
// 0x-hexadecimal: a host a URL parser reads as an IPv4 address (the WHATWG
// URL standard's "ends in a number" rule), whatever its other labels. An
// IPv6 literal is not such a host.
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		for i := 0; i < len(hex); i++ {
			if !strings.ContainsRune("0123456789abcdef", rune(hex[i])) {
				return false
			}
		}
		return true
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

func (p *WebhookPolicy) hostAllowed(host string) bool {
	for _, a := range p.Allow {
		a = strings.ToLower(strings.TrimSpace(a))
		if suf, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+suf) {
				return true
			}
		} else if host == a {
			return true
		}
	}
	return false
}

// Address ranges the netip predicates do not classify.
var (
	// awsV6Internal holds the IPv6 instance metadata service
	// (fd00:ec2::254) and the VPC resolver (fd00:ec2::253) of Nitro
	// instances. It lies inside fc00::/7, so it is refused even when
	// AllowPrivate admits private destinations.
	awsV6Internal = netip.MustParsePrefix("fd00:ec2::/32")
	// sharedV4 is the shared address space (carrier-grade NAT, RFC 6598),
	// treated as private: AllowPrivate admits it (a VPC may use it).
	sharedV4 = netip.MustParsePrefix("100.64.0.0/10")
	// reservedV4 are never global destinations (RFC 6890): "this network"
	// (a 0.x.x.x destination reaches the local host on Linux), IETF
	// protocol assignments, benchmarking, and the reserved 240/4 (with the
	// limited broadcast address).
	reservedV4 = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("240.0.0.0/4"),
	}
	// IPv6 ranges that carry an IPv4 address a translator or tunnel may
	// deliver to: the well-known NAT64 prefix (RFC 6052), 6to4 (RFC 3056)
	// and the deprecated IPv4-compatible addresses. The embedded address is
	// checked.
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	v4Compat  = netip.MustParsePrefix("::/96")
	// Refused outright, never global destinations: Teredo (RFC 4380)
	// obfuscates its IPv4 address; the local-use NAT64 prefix (RFC 8215)
	// may be any length up to /96, which puts the IPv4 address where a
	// check cannot know; SIIT's IPv4-translated addresses (RFC 6145)
	// carry one too; deprecated site-local addresses; the discard prefix
	// (RFC 6666).
	teredo       = netip.MustParsePrefix("2001::/32")
	nat64Local   = netip.MustParsePrefix("64:ff9b:1::/48")
	v4Translated = netip.MustParsePrefix("::ffff:0:0:0/96")
	siteLocal    = netip.MustParsePrefix("fec0::/10")
	discardV6    = netip.MustParsePrefix("100::/64")
)

// embeddedV4 returns the IPv4 address an IPv6 address carries for a
// translator or tunnel (well-known NAT64, 6to4, IPv4-compatible), if any.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	if !ip.Is6() {
		return netip.Addr{}, false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip), v4Compat.Contains(ip) && !ip.IsUnspecified() && ip != netip.IPv6Loopback():
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// CheckIP applies the IP rules to a resolved address. Always refused:
// link-local (including the instance metadata address 169.254.169.254),
// unspecified, multicast, broadcast and reserved IPv4 ranges, the AWS
// internal IPv6 range fd00:ec2::/32 (metadata and resolver), Teredo,
// local-use NAT64, SIIT IPv4-translated, site-local and discard IPv6; an IPv6 address embedding an IPv4 one (well-known
// NAT64, 6to4, IPv4-compatible) is judged by the embedded address. Loopback is refused
// unless AllowLoopback; private (RFC 1918, fc00::/7, 100.64.0.0/10) unless
// AllowPrivate.
func (p *WebhookPolicy) CheckIP(ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if v4, ok := embeddedV4(ip); ok {
		if err := p.CheckIP(v4); err != nil {
			return err
		}
	}
	notRoutable := func() error {
		return fmt.Errorf("%w: %s is not a routable destination", ErrDestinationRefused, ip)
	}
	for _, r := range reservedV4 {
		if r.Contains(ip) {
			return notRoutable()
		}
	}
	switch {
	case awsV6Internal.Contains(ip), teredo.Contains(ip), nat64Local.Contains(ip), v4Translated.Contains(ip),
		siteLocal.Contains(ip), discardV6.Contains(ip):
		return notRoutable()
	case ip.IsLoopback():
		if p.AllowLoopback {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrDestinationRefused, loopbackRefused)
	case ip.IsPrivate(), sharedV4.Contains(ip):
		if p.AllowPrivate {
			return nil
		}
		return fmt.Errorf("%w: private destinations are refused (the host's WEBHOOK_ALLOW_PRIVATE setting admits them)", ErrDestinationRefused)
	case ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return notRoutable()
	}
	return nil
}

// HTTPClient returns an HTTP client whose every connection is checked
// against the policy after name resolution, with the given overall timeout
// per request, no proxy (the environment's proxy settings are ignored),
// response headers bounded at 64 KiB and no automatic redirect following (a
// redirect is answered as the final response, so it cannot lead the request
// elsewhere).
//
// It never sends a request twice on its own: every request goes out on a
// fresh HTTP/1.1 connection that is closed after the response (no
// keep-alive, no HTTP/2). net/http re-sends a request transparently only on
// a REUSED connection (a keep-alive connection the server closed or reset
// while the request was in flight) and only when it can rewind the body;
// with no connection ever reused that never happens, so every byte that
// reaches the provider belongs to exactly one ledger attempt. Webhook.try
// also sends a body that cannot be rewound (no Request.GetBody), which
// closes the same door for a Client supplied by the caller.
func (p *WebhookPolicy) HTTPClient(timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrDestinationRefused, err)
		}
		return p.CheckIP(ap.Addr())
	}}
	tr := &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true,
		// A non-nil empty map turns HTTP/2 off: its transport has retry
		// paths of its own (refused streams, GOAWAY).
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		TLSHandshakeTimeout: 5 * time.Second, Proxy: nil, MaxResponseHeaderBytes: 64 << 10}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// webhookProvider is the providerKey of the webhook effect's activity
// identity.
const webhookProvider = "webhook"

// WebhookIdentity returns the identity of run's webhook effect.
//
// Without inputs.businessKey: the activity identity over (tenant, runId,
// NodeDeliver, ordinal 0, webhookProvider), computed under the recipe the
// run is STAMPED with (run.Stamps.ActivityIdentity), never the kit's
// current one. A run without stamps, or stamped with a recipe this kit does
// not compute, gets an error wrapping ledger.ErrUnsupportedRecipe (recipe
// stamps: a recorded identity is never recomputed under another recipe).
//
// With inputs.businessKey: the business identity
// identity.FromBusiness(identity.Business{Tenant: run.Tenant, Operation:
// WebhookOperation, Key: businessKey}) (keying "business-identity", recipe
// identity.BusinessRecipe, recorded on the effect record), which does
// not depend on the run: every run of the tenant carrying that business key
// (e.g. two createRun calls with two Idempotency-Keys for one business
// event) resolves to ONE effect and one provider key. The run must still
// carry its stamps (ledger.ErrUnsupportedRecipe otherwise); the ledger API
// offers no stamp-driven business derivation, so the business recipe is
// the kit's (v1, the only one). An invalid stored businessKey gets an error
// wrapping ledger.ErrInvalidIdentity.
func WebhookIdentity(run runs.Run) (identity.Identity, error) {
	bk, err := webhookBusinessKey(run.Inputs)
	if err != nil {
		return identity.Identity{}, fmt.Errorf("%w: %w", ledger.ErrInvalidIdentity, err)
	}
	// A fork's new deliveries use the host's selected recipes; any other
	// run's, its own stamps (runs.Run.EffectStamps).
	stamps := run.EffectStamps()
	if bk == "" {
		return stamps.ActivityIdentity(identity.Activity{Tenant: run.Tenant, RunID: run.ID, NodeID: NodeDeliver, Ordinal: 0, Provider: webhookProvider})
	}
	if err := stamps.Validate(); err != nil {
		return identity.Identity{}, err
	}
	return identity.FromBusiness(identity.Business{Tenant: run.Tenant, Operation: WebhookOperation, Key: bk})
}

// webhookRequestRecipe is the recipe stamp of the webhook request digest
// (see webhookDigest) recorded on business-keyed webhook effects.
const webhookRequestRecipe = "idemkit-webhook-request-v1"

// webhookDigest is the request digest of a business-keyed webhook effect:
//
//	hex(sha256("idemkit:webhook-request:v1\x00" || url || "\x00" || JCS(payload)))
//
// with the payload canonicalized per RFC 8785, so two runs sharing a
// business key but asking for a different delivery (another URL or
// payload) get *ledger.MismatchError instead of the other's outcome. The
// payload is canonicalized exactly: a number whose canonical form has
// another value (an integer beyond ±(2^53-1), a fraction no double holds)
// is refused rather than hashed equal to its neighbours, which would let
// two different deliveries share a digest. Every payload it accepts has the
// canonical form it had before, so recorded digests are unchanged.
func webhookDigest(url string, payload json.RawMessage) (string, error) {
	c, err := jcs.CanonicalizeExact(payload)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte("idemkit:webhook-request:v1\x00"))
	h.Write([]byte(url))
	h.Write([]byte{0})
	h.Write(c)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Webhook delivers the webhook workflow's node through the ledger.
//
// Guarantees: the effect identity is WebhookIdentity (the run's stamped
// activity recipe, v2 today, over tenant, runId, NodeDeliver, ordinal 0 and
// provider "webhook"; or, with inputs.businessKey, the business identity
// over tenant, "webhook" and the key, shared by every run carrying it), so
// every executor, redelivery and resume of the run (and every run of one
// business key) resolves to ONE effect record; a business-keyed effect also
// records a request digest of URL and payload (webhookRequestRecipe), so a
// run reusing the key for a different delivery fails with
// *ledger.MismatchError and sends nothing; the
// provider receives the derived provider key (ledger Identity.ProviderKey)
// in the Idempotency-Key header, the same on every try. A try is one ledger
// attempt with its own witness row, and every request that may have reached
// the receiver is exactly one attempt with a fire time (see
// WebhookPolicy.HTTPClient: nothing is re-sent behind the ledger): a
// connection that could not be made (the dial, or the TLS handshake,
// failed or did not end in time) is released; a transport error after
// sending, a 5xx, a 429 or a 408 (RFC 9110 §15.5.9: the receiver did not
// take the whole request in time) leaves the attempt escaped and is retried under
// the same key; so does an answer whose status is no HTTP status
// (outside 100..599), and a 409 saying that a request with this key is still
// in progress at the receiver (the try before, whose answer was lost, still
// running there): an error code idempotency_in_flight (OpenWOP) or
// IDEMPOTENCY_REQUEST_IN_PROGRESS in its error envelope ("error", or a
// "code" at the top or under "error"), or a Retry-After with any code but a
// mismatch's (idempotency_key_mismatch, IDEMPOTENCY_KEY_CONFLICT,
// idempotency-mismatch: the key used with another request, final); a 2xx is
// recorded as the effect's success, and any other status (a bare 409
// included) as its (final) failure. A recorded outcome is returned to every
// duplicate without a request.
//
// Back-pressure and the retry budget: the next try is scheduled in the
// effect record (ledger.Retry), never by sleeping. A 429, 503 or in-flight
// 409 with Retry-After (delay-seconds or an HTTP-date, at most 24 hours
// ahead) is retried no earlier than it asks; otherwise the delay is exponential (Backoff, doubled per try up to
// MaxBackoff) with jitter. Tries stop at MaxTries or once Budget has passed
// since the first try (both recorded on the effect, shown in its witness
// rows and in the run snapshot). Deliver returns *ledger.RetryLaterError
// naming the next try's time, and the executor parks the run until then
// (RunStore.Park); any Deliver before that time sends nothing.
type Webhook struct {
	// Ledger runs the effect. Required.
	Ledger *ledger.Ledger
	// Policy is the destination allowlist. Default: the zero WebhookPolicy.
	Policy WebhookPolicy
	// Client sends the requests. Default Policy.HTTPClient(Timeout), which
	// re-checks every connection's resolved address, sets no proxy and
	// follows no redirect; a Client set here replaces those protections
	// (CheckURL still runs before every try).
	Client *http.Client
	// Timeout bounds one try. Default 10 s.
	Timeout time.Duration
	// MaxTries caps the tries per delivery (ledger.Retry.MaxAttempts).
	// Default DefaultMaxTries (20). Env WEBHOOK_MAX_TRIES.
	MaxTries int
	// Budget is the time after the first try past which no try starts
	// (ledger.Retry.Budget). Default DefaultBudget (1 h); at least
	// 15 minutes is advised for real providers. Env
	// WEBHOOK_RETRY_BUDGET_SECONDS.
	Budget time.Duration
	// Backoff is the first retry delay, doubled per retry up to MaxBackoff,
	// with jitter. Default 1 s.
	Backoff time.Duration
	// MaxBackoff caps the retry delay. Default 5 min.
	MaxBackoff time.Duration
	// WaitInline lets Deliver wait in-process for a next try due within
	// this long instead of returning *ledger.RetryLaterError (the schedule
	// is in the effect record first, so a crash during the wait loses
	// nothing). Default 0: never wait; the caller parks the run. Meant for
	// embedding and tests, not for Lambda.
	WaitInline time.Duration
	// Wrap, if set, wraps the effect function (fence.Owner.Guard under
	// fenced-effects). Default nil.
	Wrap func(ledger.Func) ledger.Func
	// Secrets gives each tenant's signing secrets: a delivery of a tenant
	// with one carries the Standard Webhooks headers (webhook-id, the same
	// on every try of one effect; webhook-timestamp; webhook-signature).
	// Read once per Deliver, before the effect is claimed; its error is
	// returned and nothing is sent. Default nil: every delivery unsigned.
	Secrets SigningSecrets
	// Test holds the hooks only tests set. Default zero.
	Test TestConfig

	once sync.Once
}

// defaults fills in the defaults once; the fields must not change after the
// first Deliver.
func (w *Webhook) defaults() { w.once.Do(w.fill) }

func (w *Webhook) fill() {
	if w.Timeout <= 0 {
		w.Timeout = 10 * time.Second
	}
	if w.Client == nil {
		w.Client = w.Policy.HTTPClient(w.Timeout)
	}
	if w.MaxTries <= 0 {
		w.MaxTries = DefaultMaxTries
	}
	if w.Budget <= 0 {
		w.Budget = DefaultBudget
	}
	if w.Backoff <= 0 {
		w.Backoff = time.Second
	}
	if w.MaxBackoff <= 0 {
		w.MaxBackoff = 5 * time.Minute
	}
	if w.Test.Clock == nil {
		w.Test.Clock = clock.System{}
	}
}

// TestConfig holds a Webhook's hooks for tests; production leaves it zero.
type TestConfig struct {
	// Clock reads Retry-After dates (Now), stamps a signed try's
	// webhook-timestamp (Now) and paces and times the inline waits
	// (WaitInline: Now and Sleep). Read once, at the first Deliver.
	// Default the system clock. (The ledger keeps its own clock.)
	Clock ledger.Clock
}

// Defaults of the webhook's retry schedule.
const (
	// DefaultMaxTries is Webhook.MaxTries' default.
	DefaultMaxTries = 20
	// DefaultBudget is Webhook.Budget's default.
	DefaultBudget = time.Hour
)

// ErrRetriesExhausted is returned (joined with the ledger's
// *ledger.AttemptsExhaustedError) when every try ended without a recorded
// outcome and the attempt cap or the time budget leaves no other.
var ErrRetriesExhausted = errors.New("webhook: retries exhausted")

// Deliver runs the webhook node of run: at most one try (or several, within
// WaitInline). It returns nil once the effect's success is recorded (by this
// call or earlier); *ledger.RetryLaterError when the next try is scheduled
// (the caller comes back at its At); a *ledger.FailedError for a recorded
// failure; ErrRetriesExhausted (joined with *ledger.AttemptsExhaustedError)
// when the attempt cap or the time budget is spent without an outcome; an
// error wrapping ledger.ErrUnsupportedRecipe for a run whose recipe stamps
// this kit does not compute (nothing is sent); the error of Secrets when
// the tenant's signing secrets cannot be read (nothing claimed or sent);
// and ledger errors such as *ledger.InFlightError unchanged (the caller
// retries later).
func (w *Webhook) Deliver(ctx context.Context, run runs.Run) (ledger.Result, error) {
	w.defaults()
	dest, payload, err := webhookInputs(run.Inputs)
	if err != nil {
		return ledger.Result{}, &ledger.FailedError{Message: "webhook inputs: " + err.Error(), Cause: err}
	}
	id, err := WebhookIdentity(run)
	if err != nil {
		return ledger.Result{}, err
	}
	eff := ledger.Effect{Identity: id, RunID: run.ID, NodeID: NodeDeliver,
		Retry: &ledger.Retry{MaxAttempts: w.MaxTries, Budget: w.Budget, Base: w.Backoff, Max: w.MaxBackoff}}
	if id.Keying == identity.KeyingBusinessIdentity {
		d, err := webhookDigest(dest, payload)
		if err != nil {
			return ledger.Result{}, &ledger.FailedError{Message: "webhook inputs: " + err.Error(), Cause: err}
		}
		eff.RequestDigest, eff.SemanticRecipe = d, webhookRequestRecipe
	}
	return w.deliver(ctx, SeamWebhookDeliver, eff, dest, payload)
}

// deliver runs one delivery effect through the ledger, behind the named
// seam: under a replay it claims and sends nothing (runs.CheckSeam), and
// the effect function itself is guarded (runs.GuardSeam) as the last line.
func (w *Webhook) deliver(ctx context.Context, seam string, eff ledger.Effect, dest string, payload json.RawMessage) (ledger.Result, error) {
	if err := runs.CheckSeam(ctx, seam); err != nil {
		return ledger.Result{}, err
	}
	var secrets [][]byte
	if w.Secrets != nil {
		var err error
		if secrets, err = w.Secrets.WebhookSecrets(ctx, eff.Identity.Tenant); err != nil {
			// Never unsigned in place of signed: nothing is claimed or
			// sent, the caller retries later.
			return ledger.Result{}, fmt.Errorf("webhook: read the tenant's signing secret: %w", err)
		}
	}
	var fn ledger.Func = func(ctx context.Context, call ledger.Call) ([]byte, error) {
		return w.try(ctx, dest, payload, call.ProviderKey, secrets)
	}
	if w.Wrap != nil {
		fn = w.Wrap(fn)
	}
	fn = runs.GuardSeam(seam, fn)
	for idle := 0; ; {
		res, err := w.Ledger.Do(ctx, eff, fn)
		if errors.Is(err, ledger.ErrAttemptsExhausted) {
			return res, errors.Join(ErrRetriesExhausted, err)
		}
		var later *ledger.RetryLaterError
		if !errors.As(err, &later) {
			return res, err
		}
		if later.Cause == nil {
			idle++ // nothing fired: not due yet
		}
		wait := later.At.Sub(w.Test.Clock.Now()) + time.Millisecond // the ledger keeps milliseconds
		if wait > w.WaitInline || idle > 3 {
			// Not due inline, or still not due after waiting (the
			// ledger's clock disagrees): the caller parks the run.
			return res, err
		}
		if err := w.Test.Clock.Sleep(ctx, max(wait, 0)); err != nil {
			return res, err
		}
		if runs.CheckSeam(ctx, seam) != nil {
			// The execution lost its claim on the run meanwhile (or
			// its try was refused for it): no further try, each an
			// attempt the seam would refuse again until the cap, the
			// effect then exhausted for the execution that holds the
			// run (RED_TEAM 562). The caller sees the retry schedule.
			return res, err
		}
	}
}

// retryAfter reads a Retry-After header (delay-seconds or an HTTP-date,
// RFC 9110 §10.2.3, read as client.RetryAfter reads it: an HTTP-date in
// GMT and to the second) as an absolute time; ok is false when absent or
// malformed. A delay is capped at 24 hours.
func retryAfter(h string, now time.Time) (time.Time, bool) {
	d, ok := client.RetryAfter(h, now)
	if !ok {
		return time.Time{}, false
	}
	return now.Add(min(d, 24*time.Hour)), true
}

// maxConflictBody bounds how much of a 409's body is read for its error
// code.
const maxConflictBody = 64 << 10

// inFlightCodes are the error codes (client.ErrorCode) of a 409 saying that
// a request with the same Idempotency-Key is still being processed:
// OpenWOP's (the idem Guard's) and the ERP policy's, the codes the client
// package retries by default.
var inFlightCodes = []string{apierr.CodeIdempotencyInFlight, "IDEMPOTENCY_REQUEST_IN_PROGRESS"}

// mismatchCodes are the error codes of a 409 saying that the key was used
// with another request: OpenWOP's (the idem Guard's), the ERP policy's and
// the commerce policy's. Such an answer is final whatever else it carries.
var mismatchCodes = []string{apierr.CodeIdempotencyKeyMismatch, "IDEMPOTENCY_KEY_CONFLICT", "idempotency-mismatch"}

// keyInFlight reports whether a 409 whose envelope has error code code
// (possibly "") and which carried a readable Retry-After (hasRetryAfter)
// says that a request with the same key is in progress at the receiver
// (the IETF Idempotency-Key header draft and OpenWOP's
// idempotency_in_flight): its code is an in-flight code, or it asks to be
// retried later and its code is not a mismatch code. Any other 409 (a
// mismatch, a conflict of the receiver's own) is final.
func keyInFlight(code string, hasRetryAfter bool) bool {
	switch {
	case slices.Contains(mismatchCodes, code):
		return false
	case slices.Contains(inFlightCodes, code):
		return true
	default:
		return hasRetryAfter
	}
}

// redactURL cuts the URL a *url.Error names down to scheme and host: a
// webhook URL often carries a credential in its path or query (path tokens,
// "?token="), and transport errors end up in effect and run records, the
// run's error served to its tenant, and logs.
func redactURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil && u.Host != "" {
			ue.URL = u.Scheme + "://" + u.Host
		} else {
			ue.URL = "(webhook url)"
		}
	}
	return err
}

// onceBody is a request body that net/http cannot rewind: it is neither a
// *bytes.Reader, *bytes.Buffer nor *strings.Reader (for which
// http.NewRequest sets GetBody), so a transport never replays it.
type onceBody struct{ r io.Reader }

func (b onceBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (onceBody) Close() error { return nil }

// try is one delivery attempt: the effect function.
func (w *Webhook) try(ctx context.Context, dest string, payload json.RawMessage, key string, secrets [][]byte) ([]byte, error) {
	if err := w.Policy.CheckURL(dest); err != nil {
		return nil, err // recorded failure: never sent, never retried
	}
	// A request is written only on a connection the transport got (after
	// the dial and the TLS handshake): a try that ends before one was got
	// sent nothing. Only net/http's own Transport is known to report it.
	var connected atomic.Bool
	tr := w.Client.Transport
	if tr == nil {
		tr = http.DefaultTransport
	}
	_, traced := tr.(*http.Transport)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { connected.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest, nil)
	if err != nil {
		return nil, redactURL(err)
	}
	// A body net/http cannot rewind (no GetBody): the transport never
	// re-sends it by itself, whatever the connection or the headers (an
	// Idempotency-Key header makes a POST "replayable" to net/http).
	req.Body, req.ContentLength = onceBody{bytes.NewReader(payload)}, int64(len(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("User-Agent", "idemkit-webhook/1")
	sign(req.Header, secrets, key, w.Test.Clock.Now().Unix(), payload)
	resp, err := w.Client.Do(req)
	if err != nil {
		err = redactURL(err)
		if errors.Is(err, ErrDestinationRefused) {
			return nil, err // recorded failure
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" || traced && !connected.Load() {
			// No connection (a dial, a TLS handshake that failed or did
			// not end in time): the request never left.
			return nil, ledger.NotSent(err)
		}
		return nil, ledger.Uncertain(err) // may have reached the provider
	}
	var head []byte
	if resp.StatusCode == http.StatusConflict {
		// Its error code tells a key in flight from a key misused.
		head, _ = io.ReadAll(io.LimitReader(resp.Body, maxConflictBody))
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		// A 101's body is the switched connection itself, whose reads
		// the client's timeout does not bound: it is closed unread.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	}
	resp.Body.Close()
	switch {
	case resp.StatusCode < 100 || resp.StatusCode > 599:
		// No HTTP status (RFC 9110 §15), which net/http reads from any
		// three digits: no answer, as a malformed response is. The
		// receiver may have acted (RED_TEAM 445).
		return nil, ledger.Uncertain(fmt.Errorf("webhook answered %03d, which is no HTTP status", resp.StatusCode))
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return fmt.Appendf(nil, `{"status":%d}`, resp.StatusCode), nil
	case resp.StatusCode == http.StatusConflict:
		at, hasAt := retryAfter(resp.Header.Get("Retry-After"), w.Test.Clock.Now())
		if !keyInFlight(client.ErrorCode(head), hasAt) {
			return nil, errors.New("webhook answered 409") // recorded failure
		}
		// The receiver is still processing a request with this key (the
		// try before this one, whose answer was lost): this try changed
		// nothing there; the next one, under the same key, gets that
		// request's outcome.
		err := ledger.Uncertain(errors.New("webhook answered 409: a request with this Idempotency-Key is in progress at the receiver"))
		if hasAt {
			return nil, ledger.RetryAt(err, at)
		}
		return nil, err
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests ||
		resp.StatusCode == http.StatusRequestTimeout:
		// A 408 says the receiver did not take the whole request in time
		// and invites the sender to repeat it (RFC 9110 §15.5.9).
		err := ledger.Uncertain(fmt.Errorf("webhook answered %d", resp.StatusCode))
		if at, ok := retryAfter(resp.Header.Get("Retry-After"), w.Test.Clock.Now()); ok &&
			(resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable) {
			// Back-pressure: the next try no earlier than asked.
			return nil, ledger.RetryAt(err, at)
		}
		return nil, err
	default:
		return nil, fmt.Errorf("webhook answered %d", resp.StatusCode)
	}
}
