package jcs

import "testing"

// TestReorderKeepsSortedHead: an object whose first members arrived in
// order and whose later ones did not is written with its head where it
// is and only its tail reordered, whether the tail's text is still the
// input's (pending) or was already copied (an escape or whitespace in it
// or after it), at every nesting depth, in Canonicalize and the digests:
// the same bytes and errors as the reference implementation.
func TestReorderKeepsSortedHead(t *testing.T) {
	for _, in := range []string{
		`{"id":1,"name":"row \u00e9 1","v":[1.5,2,"x"],"ok":true}`,                            // escape in the head, tail pending
		`{"id":1,"name":"row","v":[1.5,2,"x\u00e9"],"ok":true}`,                               // escape in the tail
		`{"id":1,"name":"row","v":[1.5,2,"x"],"ok":"\u00e9"}`,                                 // escape in the last member
		`{"a":1,"b":2,"d":4,"c":3}`,                                                           // canonical apart from the tail
		`{"a":1,"b":2, "d":4,"c":3}`,                                                          // whitespace at the tail's start
		`{"a":1, "b":2,"d":4,"c":3}`,                                                          // whitespace in the head
		`{"a":1,"b":2,"d":{"y":1,"x":2},"c":[{"q":1,"p":2}]}`,                                 // nested reorders in the tail
		`[{"a":1,"c":3,"b":2},{"a":1,"c":"\n","b":2},{"b":1,"a":2}]`,                          // siblings
		`{"a":1,"c":2,"b":3,"b":4}`,                                                           // duplicate in the tail
		`{"a":1,"c":2,"\u0062":3}`,                                                            // escaped name in the tail
		`{"a":1,"z":2,"y":3,"x":4,"w":5,"v":6,"u":7,"t":8,"s":9,"r":10,"q":11,"p":12,"o":13}`, // more than a dozen members
		`{"x":{"a":1,"b":{"k":1,"m":2,"l":"\u00e9"},"d":4,"c":3},"w":0}`,
	} {
		sameAsOracle(t, []byte(in))
	}
	got, err := Canonicalize([]byte(`{"id":1,"name":"row \u00e9 1","v":[1.5,2,"x"],"ok":true}`))
	if want := `{"id":1,"name":"row é 1","ok":true,"v":[1.5,2,"x"]}`; err != nil || string(got) != want {
		t.Fatalf("got %s, %v; want %s", got, err, want)
	}
}
