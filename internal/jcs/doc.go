// Package jcs implements the JSON Canonicalization Scheme of RFC 8785 (JCS):
// the one byte string that every conforming implementation, in any language,
// produces for a given JSON value. idem hashes it to fingerprint a request
// body (Layer 1) and ledger hashes it for the semantic request digest v2
// (Layer 2), so two hosts agree on a digest exactly when they agree on the
// value.
//
// # Output
//
//   - No whitespace between tokens.
//   - Object members sorted by their names compared as arrays of UTF-16 code
//     units (not by UTF-8 bytes, not by locale); arrays keep their order.
//   - Strings: only '"', '\\' and the controls U+0000..U+001F are escaped; the
//     controls with a short form use it (\b \t \n \f \r), the others are
//     \u00xx with lower-case hex. Everything else, including '<', '>', '&',
//     U+007F, U+2028 and U+2029, is written as raw UTF-8. No Unicode
//     normalisation is applied ("A\u030a" stays two code points).
//   - Numbers: the IEEE 754 double nearest to the literal, written as
//     ECMAScript's Number.prototype.toString does (shortest round-trip digits;
//     exponent form "1e+21" / "1e-7" only for magnitudes >= 1e21 or < 1e-6;
//     -0 is written 0). Literals too large for a double are rejected; literals
//     too small round to 0 as in ECMAScript.
//   - true, false and null as themselves.
//
// # Rejected input
//
// RFC 8785 requires I-JSON (RFC 7493) input. Canonicalize therefore rejects,
// rather than silently repairs, everything that would make two readers
// disagree on the value:
//
//   - ErrDuplicateKey: an object names a member twice, compared after
//     unescaping ({"a":1,"\u0061":2} is a duplicate);
//   - ErrLoneSurrogate: a \uD800..\uDFFF escape that is not part of a
//     high-low pair;
//   - ErrInvalidUTF8: a string holding bytes that are not UTF-8 (this includes
//     UTF-8-encoded surrogates);
//   - ErrNumber: a number whose magnitude overflows a double (it would be
//     Infinity, which JSON cannot express);
//   - ErrTooDeep: arrays/objects nested deeper than MaxDepth;
//   - ErrInexactNumber (CanonicalizeExact and Sum256Exact only): a number
//     whose canonical form has another decimal value than the literal
//     (12345678901234567890, 0.10000000000000000001, 1e-400), so that two
//     different inputs never share a canonical form; Pointer names it;
//   - *SyntaxError: anything that is not RFC 8259 JSON (leading zeros, "1.",
//     trailing commas, raw control characters in strings, trailing data ...).
//
// The sentinel errors arrive wrapped in an *Error that carries the byte
// offset; match them with errors.Is, and the offsets with errors.As.
//
// # Why hand-written
//
// The two Go libraries were evaluated against the RFC 8785 reference data and
// the rejections above. github.com/cyberphone/json-canonicalization (the RFC
// author's) accepts invalid UTF-8, UTF-8-encoded surrogates, "01" and "1.".
// github.com/gowebpki/jcs v1.0.2 passes those checks, but reports failures as
// untyped fmt errors (callers could only match them by string), offers no
// append-style API, and is slow for a per-request digest: on the 1 MB body of
// BenchmarkCanonicalize1MB it made 385,000 allocations (16 MB) and ran at
// 31 MB/s, below the 50 MB/s Layer-1 budget before hashing.
//
// This package is a single-pass parser and writer with no intermediate
// tree. Input that is already canonical is not copied token by token: it
// is copied in one piece when something that is not canonical follows it
// (whitespace, an escape, a number to rewrite, an object to reorder), and
// Sum256 hashes input that is canonical throughout as it is, without a
// copy. Printable ASCII in strings is scanned eight bytes at a time;
// integers of up to 15 digits, and fractions and exponent forms of up to
// 15 significant digits in the positional range, are written without a
// float conversion (they are their own shortest round-trip form); member
// names without escapes are compared where they lie in the input, by
// their first eight bytes first; members are reordered by sorting small
// records of offsets, and their text is moved once, only when they
// arrived unsorted, and only from the first member out of place on.
// Sum256 streams into the hash: text outside every object is hashed as
// it completes, and the outermost object's members
// are hashed in sorted order where they were written. All scratch space
// is pooled, so a digest allocates nothing in the steady
// state, whatever the size of the body. It agrees byte for byte, errors
// included, with the previous implementation (kept for differential tests)
// and agreed with gowebpki/jcs in differential fuzzing wherever both
// accepted the input. docs/PERFORMANCE.md has the figures.
//
// # Guarantees
//
// For every accepted input x: the output is valid JSON that encoding/json
// reads as the same value; Canonicalize(Canonicalize(x)) == Canonicalize(x);
// and Canonicalize never panics, whatever the input (fuzzed).
// All functions are safe for concurrent use.
package jcs
