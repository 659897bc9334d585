package settings

import (
	"strconv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem/idemenv"
)

// A whole-number setting given a whole number too large for it (beyond
// what an int holds, or beyond what its duration holds) is refused naming
// the largest value the variable accepts, never told to be the whole
// number it is ("want whole days, at least 14" for 3000000000 days, "want
// whole seconds" for a 20-digit lease) (RED_TEAM 433).
func TestSettingOutOfRangeNamesTheLargest(t *testing.T) {
	largest := map[string]string{idemenv.RetentionHours: "2562047"} // no Max in its entry: forever or hours
	for _, s := range Settings {
		switch {
		case s.Max == unbounded && s.Unit == unitDays:
			largest[s.Name] = strconv.Itoa(maxDurationDays)
		case s.Max > 0:
			largest[s.Name] = strconv.Itoa(s.Max)
		}
	}
	for name, want := range largest {
		for _, v := range []string{"99999999999999999999", strconv.Itoa(unbounded + 1), "9223372036854775807"} {
			_, err := LoadEnv(Values(map[string]string{name: v}))
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s=%s: %v; want refused naming %s, the largest it accepts", name, v, err, want)
			}
		}
	}
	if len(largest) < 14 {
		t.Errorf("only %d whole-number settings found: %v", len(largest), largest)
	}
}
