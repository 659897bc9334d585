package idem_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestKeyGrammarsAreTheDocumentsRegexps: the OpenWOP default's key grammar
// is exactly ^[A-Za-z0-9._~-]{22,128}$ and the ERP policy's exactly 8..128
// of A-Z a-z 0-9 . _ : -, case-sensitive: every byte value at the start,
// the middle and the end of a key of the minimum length, and the lengths
// on both sides of each bound, are accepted exactly when the regexp
// matches.
func TestKeyGrammarsAreTheDocumentsRegexps(t *testing.T) {
	for _, c := range []struct {
		p  idem.KeyPolicy
		re *regexp.Regexp
	}{
		{idem.KeyOpenWOP, regexp.MustCompile(`^[A-Za-z0-9._~-]{22,128}$`)},
		{erp.Key, regexp.MustCompile(`^[A-Za-z0-9._:-]{8,128}$`)},
	} {
		check := func(k string) {
			t.Helper()
			if got, want := c.p.Validate(k) == nil, c.re.MatchString(k); got != want {
				t.Errorf("%s: %q accepted %t, the document's grammar says %t", c.p.Name, k, got, want)
			}
		}
		base := strings.Repeat("A", c.p.MinLen)
		for b := 0; b < 256; b++ {
			s := string([]byte{byte(b)})
			check(s + base[1:])
			check(base[:c.p.MinLen/2] + s + base[c.p.MinLen/2+1:])
			check(base[1:] + s)
		}
		for _, n := range []int{0, 1, c.p.MinLen - 1, c.p.MinLen, c.p.MinLen + 1, 127, 128, 129, 255, 256} {
			check(strings.Repeat("z", n))
		}
	}
}

// TestERPKeyIsCaseSensitive: under the ERP policy two keys that differ only
// in letter case name two records (the handler runs once for each, and
// each is replayed to its own key).
func TestERPKeyIsCaseSensitive(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) { c.Policy = erp.Policy })
	h := &handler{}
	for _, k := range []string{"ERP-WO-20260807-000001", "erp-wo-20260807-000001", "ERP-WO-20260807-000001", "erp-wo-20260807-000001"} {
		if r := e.call(h, v2event("POST", "POST /api/v1/inbound/work-orders", k, `{}`)); r.StatusCode != 201 || r.Headers["Idempotency-Key"] != k {
			t.Fatalf("key %q: %d %v %s", k, r.StatusCode, r.Headers, r.Body)
		}
	}
	if h.Calls() != 2 {
		t.Errorf("%d runs, want 2: one per letter case, each replayed once", h.Calls())
	}
}
