package keyspace

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"testing"
)

// referenceID is ID as first written (one running hash, each part written
// with its length in front): the record IDs already stored must not move.
func referenceID(tenant, operation, key string) string {
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(scopeDomain))
	for _, p := range [...]string{tenant, operation, key} {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return CallerPrefix + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

func TestIDUnchanged(t *testing.T) {
	long := string(make([]byte, 300)) // past the stack buffer
	cases := [][3]string{
		{"", "", ""},
		{"tenant:acme", "POST /runs", "k_0000000000000000000001"},
		{"tenant:" + long, "op", "key"},
		{"anonymous", "", long},
	}
	for _, c := range cases {
		want := referenceID(c[0], c[1], c[2])
		if got := ID(c[0], c[1], c[2]); got != want {
			t.Errorf("ID%q = %s, want %s", c, got, want)
		}
		for i := 0; i <= len(c[0]); i += max(1, len(c[0])/5) {
			if got := IDPrefixed(c[0][:i], c[0][i:], c[1], c[2]); got != want {
				t.Errorf("IDPrefixed(%q, %q, ...) = %s, want %s", c[0][:i], c[0][i:], got, want)
			}
		}
		if !IsCaller(want) {
			t.Errorf("IsCaller(%s) = false", want)
		}
	}
	// The parts stay length-prefixed: moving bytes between them changes the ID.
	if ID("ab", "c", "") == ID("a", "bc", "") {
		t.Error("ID is not injective over its parts")
	}
}

func TestIDDoesNotAllocateBeyondItsResult(t *testing.T) {
	if a := testing.AllocsPerRun(100, func() { _ = IDPrefixed("tenant:", "acme", "POST /runs", "k_0000000000000000000001") }); a > 1 {
		t.Errorf("IDPrefixed: %v allocs, want 1 (the result)", a)
	}
}

// TestIsCallerEveryCharacter: IsCaller accepts exactly the IDs whose
// hash part is base64url with the zero bits a 32-byte value leaves in
// its last character, checked against a decoding (every byte value at
// every position of an ID, and every length around the right one).
func TestIsCallerEveryCharacter(t *testing.T) {
	reference := func(id string) bool {
		if len(id) < len(CallerPrefix) || id[:len(CallerPrefix)] != CallerPrefix {
			return false
		}
		b, err := base64.RawURLEncoding.Strict().DecodeString(id[len(CallerPrefix):])
		return err == nil && len(b) == sha256.Size
	}
	id := ID("tenant:acme", "POST /runs", "k_0000000000000000000001")
	for i := 0; i < len(id); i++ {
		for c := 0; c < 256; c++ {
			in := id[:i] + string([]byte{byte(c)}) + id[i+1:]
			if got, want := IsCaller(in), reference(in); got != want {
				t.Fatalf("IsCaller(%q) = %v, want %v", in, got, want)
			}
		}
	}
	for n := len(id) - 2; n <= len(id)+2; n++ {
		in := (id + "AAAA")[:n]
		if got, want := IsCaller(in), reference(in); got != want {
			t.Fatalf("IsCaller(%q) = %v, want %v", in, got, want)
		}
	}
}
