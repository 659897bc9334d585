package idem

import (
	"strconv"
	"strings"
	"testing"
)

// rfcAccepts reports whether an Accept-Encoding value accepts the content
// coding c, read as RFC 9110 §12.5.3 reads it: a member naming c (case
// insensitive) decides by its weight; else "*" decides by its weight;
// else identity is acceptable and any other coding is not. It is the
// test's own reading, independent of the Guard's.
func rfcAccepts(accept, c string) bool {
	named, star := "", ""
	for _, m := range strings.Split(accept, ",") {
		name, params, _ := strings.Cut(m, ";")
		q := "1"
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				q = strings.TrimSpace(v)
			}
		}
		switch n := strings.ToLower(strings.TrimSpace(name)); {
		case n == c, n == "x-gzip" && c == "gzip":
			named = q
		case n == "*":
			star = q
		}
	}
	positive := func(q string) bool { f, err := strconv.ParseFloat(q, 64); return err == nil && f > 0 }
	switch {
	case named != "":
		return positive(named)
	case star != "":
		return positive(star)
	}
	return c == "identity"
}

// TestOfferedCodingsMeanWhatTheRequestAcceptedLessWhatTheGuardCannotRead
// pins the Accept-Encoding a handler inside the Guard is offered: for
// each coding the Guard reads (gzip, deflate) and identity, it accepts it
// exactly when the request did (RFC 9110 §12.5.3: q-values, "*",
// identity;q=0, case, whitespace), it accepts no coding the Guard cannot
// undo, and it never refuses everything when the request accepted
// something: a request accepting only codings the Guard cannot undo is
// offered identity. Before, "br, *;q=0" was offered "*;q=0" alone (not
// even identity acceptable; a strict compression middleware answers 406),
// and "*, identity;q=0" was offered "identity;q=0" (the gzip it accepted
// through "*" gone, and nothing acceptable).
func TestOfferedCodingsMeanWhatTheRequestAcceptedLessWhatTheGuardCannotRead(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Nothing the Guard cannot read: handed on as it came.
		{"", ""},
		{"gzip", "gzip"},
		{"gzip, deflate", "gzip, deflate"},
		{" GZip ;Q=0.5 , identity", " GZip ;Q=0.5 , identity"},
		{"identity;q=0", "identity;q=0"},
		{"*;q=0", "*;q=0"},
		{"br;q=0, gzip", "br;q=0, gzip"},
		{"x-gzip", "x-gzip"},
		// Codings the Guard cannot read left out.
		{"gzip, deflate, br, zstd", "gzip, deflate"},
		{"br, gzip;q=0.8, zstd", "gzip;q=0.8"},
		{"BR , Gzip", "Gzip"},
		{"compress, x-gzip;q=0.3", "x-gzip;q=0.3"},
		{"br", "identity"},
		{"br, zstd;q=0.5", "identity"},
		// "*" stands for the readable codings the request does not name.
		{"*", "gzip, deflate"},
		{"*, br", "gzip, deflate"},
		{"*;q=0.5, gzip", "deflate;q=0.5, gzip"},
		{"* ; q=0.2 , x-gzip;q=0", "deflate;q=0.2, x-gzip;q=0"},
		{"*, identity;q=0", "gzip, deflate, identity;q=0"},
		{"gzip;q=0, deflate;q=0, *", "gzip;q=0, deflate;q=0"},
		// Refusals kept; identity refused only as the request refused it.
		{"gzip, br, *;q=0", "gzip, *;q=0"},
		{"br, identity, *;q=0", "identity, *;q=0"},
		{"br, identity;q=0, gzip;q=0.1", "identity;q=0, gzip;q=0.1"},
		// The request accepted only what the Guard cannot read: identity,
		// never a header refusing everything.
		{"br, *;q=0", "identity"},
		{"br, identity;q=0", "identity"},
		{"zstd, gzip;q=0, *;q=0", "identity"},
		{"br, *;q=0, identity;q=0", "identity"},
	} {
		got, changed := offeredCodings(c.in)
		if got != c.want || changed != (c.in != c.want) {
			t.Errorf("offeredCodings(%q) = %q, %v; want %q", c.in, got, changed, c.want)
		}
		for _, x := range []string{"br", "zstd", "compress"} {
			if rfcAccepts(got, x) {
				t.Errorf("offeredCodings(%q) = %q accepts %s", c.in, got, x)
			}
		}
		readable := rfcAccepts(c.in, "gzip") || rfcAccepts(c.in, "deflate")
		for _, x := range []string{"gzip", "deflate", "identity"} {
			if got != "identity" && rfcAccepts(got, x) != rfcAccepts(c.in, x) {
				t.Errorf("offeredCodings(%q) = %q: accepts %s %v, the request %v", c.in, got, x, rfcAccepts(got, x), rfcAccepts(c.in, x))
			}
		}
		if got == "identity" && c.in != "identity" && readable {
			t.Errorf("offeredCodings(%q) = identity alone, though the request accepted a coding the Guard reads", c.in)
		}
		if c.in != "" && !rfcAccepts(got, "gzip") && !rfcAccepts(got, "deflate") && !rfcAccepts(got, "identity") && changed {
			t.Errorf("offeredCodings(%q) = %q refuses everything", c.in, got)
		}
	}
}
