package identity

// Kind tells effect records from host slot records in the ledger store.
type Kind string

const (
	// KindEffect is a Layer-2 effect record (key "effect#" + effectId).
	KindEffect Kind = "effect"
	// KindSlot is a host fire-once slot (key "host#" + hash), see Slot.
	KindSlot Kind = "slot"
)

// Slot names a fire-once slot of the host's own work, e.g. a scheduled job's
// run for one time slot (keyspace separation of host-generated identifiers).
//
// Slots live under the "host#" key domain of the ledger store. They never
// share a keyspace with caller Idempotency-Keys: Layer 1 keeps those in its
// own table under hashed (tenant, operation, key) scopes, and nothing in the
// ledger derives a store key from a caller-supplied key; inside the ledger
// store, effect keys are "effect#" + effectId and an effectId has no '#'.
// So no caller can name, claim or suppress a slot.
type Slot struct {
	// Job names the host's job, e.g. "schedule-fire:nightly-report".
	// Required, no NUL.
	Job string
	// Slot names the occurrence, e.g. "2026-09-18T00:00:00Z". Required, no
	// NUL.
	Slot string
}

// Key returns the slot's store key:
//
//	"host#" || base64url-nopad(sha256("idemkit:host-slot:v1\0" || job || "\0" || slot))
//
// An empty or NUL-carrying Job or Slot is an error matching ErrInvalid.
func (s Slot) Key() (string, error) {
	if err := checkField("job", s.Job, true); err != nil {
		return "", err
	}
	if err := checkField("slot", s.Slot, true); err != nil {
		return "", err
	}
	return "host#" + hashOpaque("idemkit:host-slot:v1", s.Job, s.Slot), nil
}
