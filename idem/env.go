package idem

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Environment variables read by LoadEnv (the names of the ERP service's policy,
// and IDEMPOTENCY_POLICY, which picks one of the three published policies).
const (
	EnvEnabled        = "IDEMPOTENCY_ENABLED"                  // true|false, default true
	EnvRequired       = "IDEMPOTENCY_REQUIRED"                 // true|false, default false
	EnvLeaseSeconds   = "IDEMPOTENCY_PROCESSING_LEASE_SECONDS" // 30..3600, default 300
	EnvRetentionHours = "IDEMPOTENCY_RETENTION_HOURS"          // hours; 0 or "forever" = never expire
	EnvTable          = "IDEMPOTENCY_TABLE"                    // DynamoDB table name
	EnvPolicy         = "IDEMPOTENCY_POLICY"                   // one of PolicyNames(), default openwop
	// EnvKeyHashSecret keys the log hashes of idempotency keys
	// (Config.KeyHashSecret); default unset, a random salt per process.
	EnvKeyHashSecret = "IDEMPOTENCY_KEY_HASH_SECRET"
)

// Env is the configuration read from the environment in Lambda.
type Env struct {
	// Enabled: IDEMPOTENCY_ENABLED, default true.
	Enabled bool
	// Required: IDEMPOTENCY_REQUIRED, default false.
	Required bool
	// Lease: IDEMPOTENCY_PROCESSING_LEASE_SECONDS (30..3600), default 0
	// meaning Config's default (300 s).
	Lease time.Duration
	// Retention: IDEMPOTENCY_RETENTION_HOURS. Unset leaves 0 (the profile's
	// default: 24 h OpenWOP, 720 h ERP, forever Commerce); "0" or "forever"
	// gives Forever (no expiry, no TTL attribute).
	Retention time.Duration
	// Table: IDEMPOTENCY_TABLE, the DynamoDB table (used by dynamostore).
	// Default "".
	Table string
	// Policy: IDEMPOTENCY_POLICY, one of PolicyNames (openwop, commerce,
	// erp; PolicyNamed). Unset leaves the zero Policy, which is Config's
	// default (PolicyOpenWOP); PolicyName reports the name either way.
	Policy Policy
	// KeyHashSecret: IDEMPOTENCY_KEY_HASH_SECRET (Config.KeyHashSecret).
	// Default "": a random salt per process.
	KeyHashSecret string
}

// PolicyName is the name of the policy e selects: Policy.Name, or
// "openwop" (Config's default) when IDEMPOTENCY_POLICY is unset.
func (e Env) PolicyName() string {
	if e.Policy.Name == "" {
		return PolicyOpenWOP.Name
	}
	return e.Policy.Name
}

// EffectiveRetention is how long e keeps a record after its last write:
// Retention when set, else the policy's default (Forever for no expiry).
func (e Env) EffectiveRetention() time.Duration {
	if e.Retention != 0 {
		return e.Retention
	}
	if e.Policy.Name == "" {
		return PolicyOpenWOP.Retention
	}
	return e.Policy.Retention
}

// LoadEnv reads the IDEMPOTENCY_* variables through getenv (os.Getenv in
// production) and validates them, reporting every bad value at once as a
// *ConfigError naming the variable.
func LoadEnv(getenv func(string) string) (Env, error) {
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
	parseBool(EnvEnabled, &e.Enabled)
	parseBool(EnvRequired, &e.Required)
	if v := strings.TrimSpace(getenv(EnvLeaseSeconds)); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			p = append(p, fmt.Sprintf("%s=%q: want whole seconds", EnvLeaseSeconds, v))
		case time.Duration(n)*time.Second < MinLease || time.Duration(n)*time.Second > MaxLease:
			p = append(p, fmt.Sprintf("%s=%d: must be 30..3600", EnvLeaseSeconds, n))
		default:
			e.Lease = time.Duration(n) * time.Second
		}
	}
	if v := strings.TrimSpace(getenv(EnvRetentionHours)); v != "" {
		if strings.EqualFold(v, "forever") || v == "0" {
			e.Retention = Forever
		} else if n, err := strconv.Atoi(v); err != nil || n < 0 {
			p = append(p, fmt.Sprintf("%s=%q: want whole hours, 0 or \"forever\"", EnvRetentionHours, v))
		} else {
			e.Retention = time.Duration(n) * time.Hour
		}
	}
	e.Table = strings.TrimSpace(getenv(EnvTable))
	e.KeyHashSecret = getenv(EnvKeyHashSecret)
	if v := strings.TrimSpace(getenv(EnvPolicy)); v != "" {
		pol, err := PolicyNamed(v)
		if err != nil {
			p = append(p, fmt.Sprintf("%s=%q: want one of %s", EnvPolicy, v, strings.Join(PolicyNames(), ", ")))
		} else {
			e.Policy = pol
		}
	}
	if len(p) > 0 {
		return e, &ConfigError{Problems: p}
	}
	return e, nil
}

// Apply copies the environment's settings into c (Table is for the store).
func (e Env) Apply(c *Config) {
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
}
