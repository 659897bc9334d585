package idem_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A Heartbeat so close to the Lease that its first renewal, in time, would
// come inside the renewal margin is refused: that renewal would get the
// least store call's time and, stalled, outlive the lease while the
// handler's context was live. Lease/3 (the default) and a Heartbeat that
// leaves the margin and a store call's time are accepted.
func TestHeartbeatLeavesTimeToRenew(t *testing.T) {
	const lease = 30 * time.Second
	for _, c := range []struct {
		every time.Duration
		ok    bool
	}{
		{0, true},
		{lease / 3, true},
		{lease - 2*time.Second, true},
		{lease - time.Second - 100*time.Millisecond, true},
		{lease - time.Second, false},
		{lease - 50*time.Millisecond, false},
	} {
		_, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("svc"), Lease: lease, Heartbeat: c.every})
		if c.ok && err != nil {
			t.Errorf("Heartbeat %s: %v", c.every, err)
		}
		if !c.ok && !errors.Is(err, idem.ErrConfig) {
			t.Errorf("Heartbeat %s under Lease %s accepted (err %v); its first renewal would have no time before the renewal margin", c.every, lease, err)
		}
	}
}
