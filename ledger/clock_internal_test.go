package ledger

import (
	"testing"

	"github.com/idemkit/idemkit/internal/clock"
)

// TestClockIsReadOnceFromTheTestBlock: New takes the Ledger's clock from
// Test.Clock; the former top-level Config.Clock is still read when
// Test.Clock is nil, so a caller that set it keeps its clock; with neither,
// the system clock.
func TestClockIsReadOnceFromTheTestBlock(t *testing.T) {
	type store struct{ Store }
	former, test := &clock.Funcs{}, &clock.Funcs{}
	for _, c := range []struct {
		name string
		cfg  Config
		want Clock
	}{
		{"Test.Clock", Config{Store: store{}, Test: TestConfig{Clock: test}}, test},
		{"the former Config.Clock", Config{Store: store{}, Clock: former}, former},
		{"both: Test.Clock wins", Config{Store: store{}, Clock: former, Test: TestConfig{Clock: test}}, test},
		{"neither: the system clock", Config{Store: store{}}, clock.System{}},
	} {
		l, err := New(c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if l.cfg.Test.Clock != c.want {
			t.Errorf("%s: the Ledger's clock is %#v, want %#v", c.name, l.cfg.Test.Clock, c.want)
		}
	}
}
