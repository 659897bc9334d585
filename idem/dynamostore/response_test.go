package dynamostore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"reflect"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

func TestPackRoundTrip(t *testing.T) {
	random := make([]byte, 100_000)
	_, _ = rand.Read(random)
	for name, r := range map[string]*idem.Response{
		"empty":        {Status: 204},
		"binary":       {Status: 200, Body: []byte{0, 0xff, '\n', 0x80}},
		"headers":      {Status: 409, Headers: map[string][]string{"Link": {"<a>", "<b>", "<a>"}, "X-Empty": {""}, "X-Obs": {"\xe9\x00"}}, Body: []byte(`{"a":"\u00e9"}`)},
		"compressible": {Status: 200, Body: bytes.Repeat([]byte("abcdefgh"), 10_000)},
		"random":       {Status: 200, Body: random},
	} {
		blob, enc := pack(r)
		got, err := unpack(blob, enc)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Status != r.Status || !bytes.Equal(got.Body, r.Body) || (len(r.Headers) > 0 && !reflect.DeepEqual(got.Headers, r.Headers)) {
			t.Fatalf("%s: round trip differs", name)
		}
		if name == "compressible" && enc != encFlate {
			t.Errorf("compressible body stored %s", enc)
		}
		if name == "random" && enc != encRaw {
			t.Errorf("random body stored %s", enc)
		}
	}
}

func TestUnpackRejectsCorruption(t *testing.T) {
	blob, enc := pack(&idem.Response{Status: 200, Headers: map[string][]string{"A": {"b"}}, Body: []byte("x")})
	for _, b := range [][]byte{nil, {2}, blob[:3], {1, 0xff, 0xff, 0xff}} {
		if _, err := unpack(b, enc); !errors.Is(err, errCorrupt) {
			t.Errorf("%x: err = %v", b, err)
		}
	}
	if _, err := unpack(blob, "zstd"); !errors.Is(err, errCorrupt) {
		t.Errorf("unknown encoding: %v", err)
	}
	// A deflate bomb beyond maxBlob is refused.
	big, enc := pack(&idem.Response{Status: 200, Body: make([]byte, maxBlob+10)})
	if enc != encFlate {
		t.Fatal("zeros not compressed")
	}
	if _, err := unpack(big, enc); !errors.Is(err, errCorrupt) {
		t.Errorf("oversized inflate: %v", err)
	}
}

func TestSplit(t *testing.T) {
	b := make([]byte, 2*chunkSize+1)
	p := split(b)
	if len(p) != 3 || len(p[0]) != chunkSize || len(p[2]) != 1 {
		t.Fatalf("split into %d", len(p))
	}
	if p := split(make([]byte, chunkSize)); len(p) != 1 {
		t.Fatalf("exact chunk split into %d", len(p))
	}
}

// TestInlineTag: the first byte of an inline blob names its encoding, so a
// completion writes the blob alone; an unknown tag is corruption.
func TestInlineTag(t *testing.T) {
	for name, r := range map[string]*idem.Response{
		"raw":   {Status: 201, Body: []byte(`{"ok":true}`)},
		"flate": {Status: 200, Body: bytes.Repeat([]byte("abcdefgh"), 1000)},
	} {
		blob, enc := pack(r)
		if enc != name {
			t.Fatalf("%s packed as %s", name, enc)
		}
		got, err := unpackInline(tagInline(blob, enc))
		if err != nil || got.Status != r.Status || !bytes.Equal(got.Body, r.Body) {
			t.Fatalf("%s: round trip: %v", name, err)
		}
	}
	for _, b := range [][]byte{nil, {0}, {3, 1, 2}, {tagFlate, 0xff}} {
		if _, err := unpackInline(b); !errors.Is(err, errCorrupt) {
			t.Errorf("%x: err = %v", b, err)
		}
	}
}
