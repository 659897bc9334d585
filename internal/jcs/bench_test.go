package jcs

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"testing"
)

// BenchmarkCanonicalize1MB: Canonicalize on a 1 MB indented request body
// with unsorted keys (testBody).
func BenchmarkCanonicalize1MB(b *testing.B) {
	in := testBody(1 << 20)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigest1MB: the Layer-1 body digest, SHA-256 over JCS, on the same
// 1 MB body (Sum256, pooled buffers).
func BenchmarkDigest1MB(b *testing.B) {
	in := testBody(1 << 20)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	var sum [sha256.Size]byte
	for b.Loop() {
		var err error
		if sum, err = Sum256(in); err != nil {
			b.Fatal(err)
		}
	}
	_ = sum
}

// BenchmarkCanonicalizeSmall: a typical small API body (a few hundred bytes).
func BenchmarkCanonicalizeSmall(b *testing.B) {
	in := []byte(`{"customer":{"name":"Zoë","email":"z@example.com"},"amount":1999,"currency":"EUR","items":[{"sku":"A-1","qty":2,"price":9.995},{"sku":"B-2","qty":1,"price":0.01}],"note":"line1\nline2","idempotent":true}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	buf := make([]byte, 0, 512)
	for b.Loop() {
		var err error
		if buf, err = Append(buf[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}

// rowsBody returns about size bytes of compact JSON made of many small
// objects with unsorted members, short strings with an escape, fractions
// and small integers: the body of idem's BenchmarkDigestJSON1MB, the
// token-dense end of request bodies.
func rowsBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"rows":[`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"row \u00e9 %d","v":[1.5,2,"x"],"ok":true}`, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// BenchmarkDigestRows1MB: Sum256Exact (idem's body digest) on rowsBody.
func BenchmarkDigestRows1MB(b *testing.B) {
	in := rowsBody(1 << 20)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sum256Exact(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendRows1MB: the canonicaliser alone (no hash) on rowsBody,
// into a reused buffer.
func BenchmarkAppendRows1MB(b *testing.B) {
	in := rowsBody(1 << 20)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	buf := make([]byte, 0, len(in))
	for b.Loop() {
		var err error
		if buf, err = Append(buf[:0], in); err != nil {
			b.Fatal(err)
		}
	}
}

// body1KB is idem's 1 KB replay benchmark body: an array of small
// objects with unsorted members and escaped non-ASCII.
func body1KB() []byte {
	var b bytes.Buffer
	b.WriteString(`{"workflow":"wf_01HZX","input":{"items":[`)
	for i := 0; b.Len() < 1000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"SKU-%04d","qty":%d,"note":"caf\u00e9 <&>"}`, i, i%7)
	}
	b.WriteString(`]}}`)
	return b.Bytes()
}

// BenchmarkDigest1KB: Sum256Exact on idem's 1 KB benchmark body.
func BenchmarkDigest1KB(b *testing.B) {
	in := body1KB()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sum256Exact(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDigestCanonical1MB: Sum256Exact on rowsBody already in
// canonical form (as a client that canonicalises before sending would
// send it): the input is validated and hashed as it is, without a copy.
func BenchmarkDigestCanonical1MB(b *testing.B) {
	in, err := Canonicalize(rowsBody(1 << 20))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Sum256Exact(in); err != nil {
			b.Fatal(err)
		}
	}
}
