package idemenv_test

import (
	"fmt"

	"github.com/idemkit/idemkit/idem/idemenv"
)

// Load reads the IDEMPOTENCY_* variables; unset ones keep their defaults.
func ExampleLoad() {
	vars := map[string]string{"IDEMPOTENCY_REQUIRED": "true", "IDEMPOTENCY_PROCESSING_LEASE_SECONDS": "120", "IDEMPOTENCY_RETENTION_HOURS": "720", "IDEMPOTENCY_TABLE": "idem"}
	env, err := idemenv.Load(func(k string) string { return vars[k] })
	fmt.Println(env.Enabled, env.Required, env.Lease, env.Retention, env.Table, err)
	// Output:
	// true true 2m0s 720h0m0s idem <nil>
}
