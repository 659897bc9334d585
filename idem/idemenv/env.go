// Package idemenv reads Layer 1's settings from the process environment,
// the way a Lambda function is configured:
//
//	env, err := idemenv.Load(os.Getenv)
//	if err != nil {
//		return err // every bad variable at once, matching idem.ErrConfig
//	}
//	cfg := idem.Config{Store: store, Tenant: idem.IAMPrincipal()}
//	env.Apply(&cfg)
//	guard, err := idem.New(cfg)
//
// Unset variables leave idem.Config's defaults in place.
package idemenv

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/idem"
	// The presets IDEMPOTENCY_POLICY names, registered when imported.
	_ "github.com/idemkit/idemkit/idem/policy/commerce"
	_ "github.com/idemkit/idemkit/idem/policy/erp"
)

// Environment variables read by Load (the names of the ERP service's policy,
// and IDEMPOTENCY_POLICY, which picks one of the three published policies).
const (
	Enabled        = "IDEMPOTENCY_ENABLED"                  // true|false, default true
	Required       = "IDEMPOTENCY_REQUIRED"                 // true|false, default false
	LeaseSeconds   = "IDEMPOTENCY_PROCESSING_LEASE_SECONDS" // 30..3600, default 300
	RetentionHours = "IDEMPOTENCY_RETENTION_HOURS"          // hours; 0 or "forever" = never expire
	Table          = "IDEMPOTENCY_TABLE"                    // DynamoDB table name
	Policy         = "IDEMPOTENCY_POLICY"                   // one of idem.PolicyNames(), default openwop
	// KeyHashSecret keys the log hashes of idempotency keys
	// (idem.Config.KeyHashSecret); default unset, a random salt per process.
	KeyHashSecret = "IDEMPOTENCY_KEY_HASH_SECRET"
	// StoreTimeoutMS bounds each store call of a request
	// (idem.Config.StoreTimeout): 100..60000 milliseconds, default 10000.
	StoreTimeoutMS = "IDEMPOTENCY_STORE_TIMEOUT_MS"
	// WaitMS is how long a duplicate waits for the first request's outcome
	// (idem.Config.Wait): 0..60000 milliseconds, 0 = answer at once,
	// default 5000.
	WaitMS = "IDEMPOTENCY_WAIT_MS"
	// DerivedKeys turns on the derived-key mode for the chosen policy
	// (idem.Policy.DerivedKeys: routes whose key is derived from the
	// request): true|false, default the policy's own (false in every
	// preset).
	DerivedKeys = "IDEMPOTENCY_DERIVED_KEYS"
)

// The ranges of the millisecond variables.
const (
	minStoreTimeout = 100 * time.Millisecond
	maxMillis       = 60000
)

// maxRetentionHours is the longest finite IDEMPOTENCY_RETENTION_HOURS: the
// most whole hours a time.Duration holds (about 292 years).
const maxRetentionHours = int(math.MaxInt64 / int64(time.Hour))

// Env is the configuration read from the environment in Lambda.
type Env struct {
	// Enabled: IDEMPOTENCY_ENABLED, default true.
	Enabled bool
	// Required: IDEMPOTENCY_REQUIRED, default false.
	Required bool
	// Lease: IDEMPOTENCY_PROCESSING_LEASE_SECONDS (30..3600), default 0
	// meaning idem.Config's default (300 s).
	Lease time.Duration
	// Retention: IDEMPOTENCY_RETENTION_HOURS. Unset leaves 0 (the policy's
	// default: 24 h OpenWOP, 720 h ERP, forever commerce); "0" or "forever"
	// gives idem.Forever (no expiry, no TTL attribute).
	Retention time.Duration
	// Table: IDEMPOTENCY_TABLE, the DynamoDB table (used by dynamostore).
	// Default "".
	Table string
	// Policy: IDEMPOTENCY_POLICY, one of idem.PolicyNames (openwop, commerce,
	// erp; idem.PolicyNamed). Unset leaves the zero idem.Policy, which is idem.Config's
	// default (idem.PolicyOpenWOP); PolicyName reports the name either way.
	Policy idem.Policy
	// KeyHashSecret: IDEMPOTENCY_KEY_HASH_SECRET (idem.Config.KeyHashSecret).
	// Default "": a random salt per process.
	KeyHashSecret string
	// StoreTimeout: IDEMPOTENCY_STORE_TIMEOUT_MS (100..60000 ms). Default 0
	// meaning idem.Config's default (idem.DefaultStoreTimeout, 10 s).
	StoreTimeout time.Duration
	// Wait: IDEMPOTENCY_WAIT_MS (0..60000 ms), as idem.Config.Wait: "0"
	// gives a negative value (a duplicate is answered at once). Default 0
	// meaning idem.Config's default (idem.DefaultWait, 5 s).
	Wait time.Duration
	// DerivedKeys: IDEMPOTENCY_DERIVED_KEYS. Default false: the policy's
	// own Policy.DerivedKeys (false in every preset); true turns it on.
	DerivedKeys bool
}

// PolicyName is the name of the policy e selects: Policy.Name, or
// "openwop" (idem.Config's default) when IDEMPOTENCY_POLICY is unset.
func (e Env) PolicyName() string {
	if e.Policy.Name == "" {
		return idem.PolicyOpenWOP.Name
	}
	return e.Policy.Name
}

// EffectiveRetention is how long e keeps a record after its last write:
// Retention when set, else the policy's default (idem.Forever for no expiry).
func (e Env) EffectiveRetention() time.Duration {
	if e.Retention != 0 {
		return e.Retention
	}
	if e.Policy.Name == "" {
		return idem.PolicyOpenWOP.Retention
	}
	return e.Policy.Retention
}

// Load reads the IDEMPOTENCY_* variables through getenv (os.Getenv in
// production) and validates them, reporting every bad value at once as a
// *idem.ConfigError naming the variable.
func Load(getenv func(string) string) (Env, error) {
	e := Env{Enabled: true}
	var p []string
	parseBool := func(name string, dst *bool) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			p = append(p, fmt.Sprintf("%s=%q: want true or false", name, v))
			return
		}
		*dst = b
	}
	parseBool(Enabled, &e.Enabled)
	parseBool(Required, &e.Required)
	if v := strings.TrimSpace(getenv(LeaseSeconds)); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			p = append(p, fmt.Sprintf("%s=%q: want whole seconds, 30..3600", LeaseSeconds, v))
		case err != nil || n < int(idem.MinLease/time.Second) || n > int(idem.MaxLease/time.Second): // compared before multiplying: a huge n would wrap
			p = append(p, fmt.Sprintf("%s=%s: must be 30..3600", LeaseSeconds, v))
		default:
			e.Lease = time.Duration(n) * time.Second
		}
	}
	if v := strings.TrimSpace(getenv(RetentionHours)); v != "" {
		if n, err := strconv.Atoi(v); strings.EqualFold(v, "forever") || (err == nil && n == 0) {
			// Zero hours however written ("0", "00", "+0"): never expire,
			// not the policy's default (RED_TEAM 429).
			e.Retention = idem.Forever
		} else if (err != nil || n < 0) && !(errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-")) {
			p = append(p, fmt.Sprintf("%s=%q: want whole hours, 0 or \"forever\"", RetentionHours, v))
		} else if err != nil || n > maxRetentionHours { // err: beyond an int (RED_TEAM 433)
			p = append(p, fmt.Sprintf("%s=%q: at most %d hours (the longest a duration holds, about 292 years), or \"forever\"", RetentionHours, v, maxRetentionHours))
		} else {
			e.Retention = time.Duration(n) * time.Hour
		}
	}
	millis := func(name string, lo time.Duration) (time.Duration, bool) {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			return 0, false
		}
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			p = append(p, fmt.Sprintf("%s=%q: want whole milliseconds, %d..%d", name, v, lo.Milliseconds(), maxMillis))
		case time.Duration(n)*time.Millisecond < lo || n > maxMillis:
			p = append(p, fmt.Sprintf("%s=%q: whole milliseconds, must be %d..%d", name, v, lo.Milliseconds(), maxMillis))
		default:
			return time.Duration(n) * time.Millisecond, true
		}
		return 0, false
	}
	if d, ok := millis(StoreTimeoutMS, minStoreTimeout); ok {
		e.StoreTimeout = d
	}
	if d, ok := millis(WaitMS, 0); ok {
		e.Wait = d
		if d == 0 {
			e.Wait = -1 // as idem.Config.Wait: no wait
		}
	}
	parseBool(DerivedKeys, &e.DerivedKeys)
	e.Table = strings.TrimSpace(getenv(Table))
	e.KeyHashSecret = getenv(KeyHashSecret)
	if v := strings.TrimSpace(getenv(Policy)); v != "" {
		pol, err := idem.PolicyNamed(v)
		if err != nil {
			p = append(p, fmt.Sprintf("%s=%q: want one of %s", Policy, v, strings.Join(idem.PolicyNames(), ", ")))
		} else {
			e.Policy = pol
		}
	}
	pol := e.Policy
	if pol.Name == "" {
		pol = idem.PolicyOpenWOP
	}
	if e.Retention > 0 && e.Retention < pol.MinRetention {
		p = append(p, fmt.Sprintf("%s=%d: below the %s policy's minimum of %d hours", RetentionHours,
			int64(e.Retention/time.Hour), pol.Name, int64(pol.MinRetention/time.Hour)))
	}
	if len(p) > 0 {
		return e, &idem.ConfigError{Problems: p}
	}
	return e, nil
}

// Apply copies the environment's settings into c (Table is for the store).
func (e Env) Apply(c *idem.Config) {
	c.Disabled = !e.Enabled
	c.Required = e.Required
	if e.Lease != 0 {
		c.Lease = e.Lease
	}
	if e.Retention != 0 {
		c.Retention = e.Retention
	}
	if e.Policy.Name != "" {
		c.Policy = e.Policy
	}
	if e.KeyHashSecret != "" {
		c.KeyHashSecret = e.KeyHashSecret
	}
	if e.StoreTimeout != 0 {
		c.StoreTimeout = e.StoreTimeout
	}
	if e.Wait != 0 {
		c.Wait = e.Wait
	}
	if e.DerivedKeys {
		if c.Policy.Name == "" {
			c.Policy = idem.PolicyOpenWOP // Config's default, made explicit to change it
		}
		c.Policy.DerivedKeys = true
	}
}
