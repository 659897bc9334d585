package settings

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// Each setting states its default and range once, in its Settings entry,
// and that entry is what the code does: an unset variable reads as its
// Default (LoadEnv starts from defaults(), Layer 1's from idemenv.Load),
// a whole-number setting accepts exactly Min..Max and its error names the
// range, `idemkit dev`'s own defaults (DevDefaults) are entries' Dev values
// LoadEnv accepts, and a flag's help states the default it overrides.
// docs/CONFIGURATION.md's table is rendered from the same entries
// (TestReadmeSettingsTable).
func TestSettingDefaultsAndRangesStatedOnce(t *testing.T) {
	load := func(m map[string]string) (Env, error) { return LoadEnv(Values(m)) }
	unset, err := load(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range Settings {
		if s.Default != "" {
			got, err := load(map[string]string{s.Name: s.Default})
			if err != nil {
				t.Errorf("%s: its Default %q is refused: %v", s.Name, s.Default, err)
			} else if s.Layer1 && layer1(t, got) != layer1(t, unset) {
				t.Errorf("%s: unset, Layer 1 runs with %s; with its Default %q, %s", s.Name, layer1(t, unset), s.Default, layer1(t, got))
			} else if s.Layer1 {
				got.Idem = unset.Idem
			}
			if err == nil && !reflect.DeepEqual(got, unset) {
				t.Errorf("%s: unset reads as\n%+v\nbut its Default %q reads as\n%+v", s.Name, unset, s.Default, got)
			}
		}
		if s.Default == "" && s.DefaultDoc == "" {
			t.Errorf("%s: neither Default nor DefaultDoc states its default", s.Name)
		}
		if s.Max == 0 {
			if s.Unit != "" || s.num != nil {
				t.Errorf("%s: a whole-number entry without a range", s.Name)
			}
			continue
		}
		if !s.Layer1 && (s.num == nil || s.Unit == "") {
			t.Errorf("%s: a range without a whole-number parser and unit", s.Name)
		}
		bounds := []int{s.Min}
		if s.Max != unbounded {
			bounds = append(bounds, s.Max)
		}
		for _, n := range bounds {
			if _, err := load(map[string]string{s.Name: strconv.Itoa(n)}); err != nil {
				t.Errorf("%s=%d (a bound of its range) is refused: %v", s.Name, n, err)
			}
		}
		outside := []int{s.Min - 1}
		if s.Max != unbounded {
			outside = append(outside, s.Max+1)
		}
		for _, n := range outside {
			_, err := load(map[string]string{s.Name: strconv.Itoa(n)})
			if err == nil || !strings.Contains(err.Error(), s.Name) {
				t.Errorf("%s=%d (outside its range) = %v, want an error naming it", s.Name, n, err)
				continue
			}
			rng := fmt.Sprintf("%d..%d", s.Min, s.Max)
			if s.Max == unbounded {
				rng = fmt.Sprintf("at least %d", s.Min)
			}
			if !s.Layer1 && !strings.Contains(err.Error(), rng) {
				t.Errorf("%s=%d: error %q does not state the range %s", s.Name, n, err, rng)
			}
		}
	}
	dev := DevDefaults()
	if len(dev) == 0 {
		t.Fatal("DevDefaults is empty")
	}
	for name, v := range dev {
		if _, err := load(map[string]string{name: v}); err != nil {
			t.Errorf("`idemkit dev`'s default %s=%s is refused: %v", name, v, err)
		}
	}
	for _, s := range Settings {
		if s.Flag != "" && !s.BoolFlag && s.Default != "" && !strings.Contains(s.Usage(), "(default "+s.Default+")") {
			t.Errorf("--%s: help %q does not state the default %s", s.Flag, s.Usage(), s.Default)
		}
	}
}

// layer1 is what Layer 1 runs with under e: the Guard's resolved policy,
// switches, lease and retention.
func layer1(t *testing.T, e Env) string {
	t.Helper()
	c := idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("t")}
	e.Idem.Apply(&c)
	g, err := idem.New(c)
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	r := g.Config()
	return fmt.Sprintf("policy %s, disabled %v, required %v, lease %s, retention %s, store timeout %s, wait %s, derived keys %v",
		r.Policy.Name, r.Disabled, r.Required, r.Lease, r.Retention, r.StoreTimeout, r.Wait, r.Policy.DerivedKeys)
}
