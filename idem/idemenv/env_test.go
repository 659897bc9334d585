package idemenv_test

import (
	"errors"
	"github.com/idemkit/idemkit/idem/idemenv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// IDEMPOTENCY_POLICY picks one of the three published policies by name
// (case and spaces ignored); Apply puts it in Config.Policy; unset leaves
// Config's default (the OpenWOP policy); an unknown name is a *ConfigError
// naming the variable and every allowed value.
func TestEnvPolicy(t *testing.T) {
	for name, want := range map[string]string{"": "openwop", "openwop": "openwop", " Commerce ": "commerce", "erp": "erp"} {
		e, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.Policy: name}[k] })
		if err != nil || e.PolicyName() != want {
			t.Fatalf("%q: %q %v", name, e.PolicyName(), err)
		}
		var c idem.Config
		e.Apply(&c)
		if name == "" && c.Policy.Name != "" || name != "" && c.Policy.Name != want {
			t.Fatalf("%q: Apply set Policy %q", name, c.Policy.Name)
		}
	}
	_, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.Policy: "strict"}[k] })
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("bad policy: %v", err)
	}
	for _, s := range []string{"IDEMPOTENCY_POLICY", `"strict"`, "openwop", "commerce", "erp"} {
		if !strings.Contains(ce.Problems[0], s) {
			t.Errorf("problem %q does not name %s", ce.Problems[0], s)
		}
	}
	// The commerce policy keeps records forever unless a retention is set.
	e, _ := idemenv.Load(func(k string) string { return map[string]string{idemenv.Policy: "commerce"}[k] })
	if e.EffectiveRetention() != idem.Forever {
		t.Fatalf("commerce retention %s", e.EffectiveRetention())
	}
	e, _ = idemenv.Load(func(k string) string {
		return map[string]string{idemenv.Policy: "commerce", idemenv.RetentionHours: "48"}[k]
	})
	if e.EffectiveRetention().Hours() != 48 {
		t.Fatalf("commerce with 48 h: %s", e.EffectiveRetention())
	}
}

// The store timeout, the wait budget and the derived-key mode are set
// from the environment like the other settings: unset leaves idem.Config's
// defaults (10 s, 5 s, the policy's own: off in every preset); a value is
// what the Guard runs with; "0" ms of wait means a duplicate does not wait;
// derived keys turn on for the chosen policy (its other rules unchanged),
// so a DeriveKey route is accepted by idem.New.
func TestEnvStoreTimeoutWaitAndDerivedKeys(t *testing.T) {
	guard := func(env map[string]string, routes map[string]idem.Route) (idem.Config, error) {
		e, err := idemenv.Load(func(k string) string { return env[k] })
		if err != nil {
			return idem.Config{}, err
		}
		c := idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("t"), Routes: routes}
		e.Apply(&c)
		g, err := idem.New(c)
		if err != nil {
			return idem.Config{}, err
		}
		return g.Config(), nil
	}
	c, err := guard(nil, nil)
	if err != nil || c.StoreTimeout != idem.DefaultStoreTimeout || c.Wait != idem.DefaultWait || c.Policy.DerivedKeys {
		t.Fatalf("unset: store timeout %s, wait %s, derived keys %v, %v", c.StoreTimeout, c.Wait, c.Policy.DerivedKeys, err)
	}
	c, err = guard(map[string]string{idemenv.StoreTimeoutMS: "2500", idemenv.WaitMS: " 750 "}, nil)
	if err != nil || c.StoreTimeout != 2500*time.Millisecond || c.Wait != 750*time.Millisecond {
		t.Fatalf("set: store timeout %s, wait %s, %v", c.StoreTimeout, c.Wait, err)
	}
	c, err = guard(map[string]string{idemenv.WaitMS: "0"}, nil)
	if err != nil || c.Wait >= 0 {
		t.Fatalf("%s=0: wait %s (want no wait, a negative Config.Wait), %v", idemenv.WaitMS, c.Wait, err)
	}
	derive := map[string]idem.Route{"POST /orders": {DeriveKey: func([]byte, func(string) []string) (string, error) { return "k", nil }}}
	if _, err := guard(nil, derive); !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("a DeriveKey route without derived keys: %v", err)
	}
	for _, pol := range []string{"", "erp"} {
		c, err = guard(map[string]string{idemenv.DerivedKeys: "true", idemenv.Policy: pol}, derive)
		want := idem.PolicyOpenWOP
		if pol == "erp" {
			want = erp.Policy
		}
		if err != nil || !c.Policy.DerivedKeys || c.Policy.Name != want.Name || c.Retention != want.Retention {
			t.Fatalf("%s=true under %q: policy %q derived %v retention %s, %v", idemenv.DerivedKeys, pol, c.Policy.Name, c.Policy.DerivedKeys, c.Retention, err)
		}
	}
}

// A bad value of each new variable is refused at start-up, every one at
// once, each problem naming its variable and what it wants.
func TestEnvBadStoreTimeoutWaitAndDerivedKeys(t *testing.T) {
	env := map[string]string{
		idemenv.StoreTimeoutMS: "10s",
		idemenv.WaitMS:         "-1",
		idemenv.DerivedKeys:    "sometimes",
	}
	_, err := idemenv.Load(func(k string) string { return env[k] })
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 3 || !errors.Is(err, idem.ErrConfig) {
		t.Fatalf("%v", err)
	}
	for i, want := range [][]string{
		{idemenv.StoreTimeoutMS, `"10s"`, "milliseconds", "100..60000"},
		{idemenv.WaitMS, `"-1"`, "milliseconds", "0..60000"},
		{idemenv.DerivedKeys, `"sometimes"`, "true or false"},
	} {
		for _, s := range want {
			if !strings.Contains(ce.Problems[i], s) {
				t.Errorf("problem %q does not say %s", ce.Problems[i], s)
			}
		}
	}
	for _, v := range []string{"99", "60001"} {
		if _, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.StoreTimeoutMS: v}[k] }); err == nil {
			t.Errorf("%s=%s accepted", idemenv.StoreTimeoutMS, v)
		}
	}
	if _, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.WaitMS: "60001"}[k] }); err == nil {
		t.Errorf("%s=60001 accepted", idemenv.WaitMS)
	}
}

// Whole numbers too large for a time.Duration are refused, never wrapped
// into another value: 2^55+60 seconds would wrap to a 60 s lease, and
// hours beyond about 292 years to a short or negative retention. The
// largest retention a duration holds is accepted as it is.
func TestEnvDurationsDoNotWrap(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{idemenv.LeaseSeconds, "36028797018964028"}, // (1<<55) + 60: wraps to 60 s
		{idemenv.LeaseSeconds, "9223372036854775807"},
		{idemenv.RetentionHours, "2562048"}, // one hour more than a duration holds
		{idemenv.RetentionHours, "5124120"}, // wraps to about 24 h
		{idemenv.RetentionHours, "9223372036854775807"},
	} {
		e, err := idemenv.Load(func(k string) string { return map[string]string{c.name: c.value}[k] })
		var ce *idem.ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], c.name) {
			t.Errorf("%s=%s: accepted (lease %s, retention %s), err %v", c.name, c.value, e.Lease, e.Retention, err)
		}
	}
	e, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.RetentionHours: "2562047"}[k] })
	if err != nil || e.Retention != 2562047*time.Hour || e.Retention <= 0 {
		t.Fatalf("largest retention: %s %v", e.Retention, err)
	}
}

// A retention below the selected policy's minimum is refused by Load,
// naming the variable, the policy and its minimum in hours, before
// anything starts (not later, by idem.New, in the Config's terms).
func TestEnvRetentionBelowThePolicyMinimum(t *testing.T) {
	for _, c := range []struct{ policy, hours, min string }{{"", "5", "24"}, {"openwop", "23", "24"}} {
		env := map[string]string{idemenv.RetentionHours: c.hours, idemenv.Policy: c.policy}
		_, err := idemenv.Load(func(k string) string { return env[k] })
		var ce *idem.ConfigError
		if !errors.As(err, &ce) || len(ce.Problems) != 1 {
			t.Fatalf("%v: %v, want one problem", env, err)
		}
		for _, s := range []string{idemenv.RetentionHours, c.hours, "openwop", c.min + " hours"} {
			if !strings.Contains(ce.Problems[0], s) {
				t.Errorf("problem %q does not say %s", ce.Problems[0], s)
			}
		}
	}
	for _, env := range []map[string]string{{idemenv.RetentionHours: "24"}, {idemenv.RetentionHours: "forever"}, {idemenv.RetentionHours: "1", idemenv.Policy: "erp"}} {
		if _, err := idemenv.Load(func(k string) string { return env[k] }); err != nil {
			t.Errorf("%v refused: %v", env, err)
		}
	}
}

// Every spelling of zero hours in IDEMPOTENCY_RETENTION_HOURS that Load
// reads as a number means what "0" means, never expire: "00", "+0" and
// "-0" were taken as unset, the policy's default (24 h under the OpenWOP
// policy), so records meant to be kept for ever expired after a day
// (RED_TEAM 429).
func TestEnvRetentionZeroHoursIsForeverHoweverSpelled(t *testing.T) {
	for _, v := range []string{"0", "00", "+0", "-0", " 000 "} {
		for _, policy := range []string{"", "erp"} {
			env := map[string]string{idemenv.RetentionHours: v, idemenv.Policy: policy}
			e, err := idemenv.Load(func(k string) string { return env[k] })
			if err != nil || e.Retention != idem.Forever || e.EffectiveRetention() != idem.Forever {
				t.Errorf("%s=%q (policy %q): retention %v (effective %v), %v; want forever", idemenv.RetentionHours, v, policy, e.Retention, e.EffectiveRetention(), err)
			}
		}
	}
}
