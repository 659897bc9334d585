package jcs_test

import (
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/internal/jcs"
)

func ExampleCanonicalize() {
	out, err := jcs.Canonicalize([]byte(`{
		"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001, -0],
		"string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/<>",
		"literals": [null, true, false]
	}`))
	fmt.Println(string(out), err)

	_, err = jcs.Canonicalize([]byte(`{"a":1,"\u0061":2}`))
	fmt.Println(errors.Is(err, jcs.ErrDuplicateKey), err)
	_, err = jcs.Canonicalize([]byte(`["\ud800"]`))
	fmt.Println(errors.Is(err, jcs.ErrLoneSurrogate), err)
	// Output:
	// {"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27,0],"string":"€$\u000f\nA'B\"\\\\\"/<>"} <nil>
	// true jcs: duplicate object key at offset 7
	// true jcs: lone UTF-16 surrogate in string at offset 2
}
