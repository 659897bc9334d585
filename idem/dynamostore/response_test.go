package dynamostore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/respsize"
	"github.com/idemkit/idemkit/internal/itemsize"
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

// TestNotKeptFormat: a not-kept response (the original status and the
// size, no headers or body) packs into a few raw bytes, inline, and reads
// back as written; a truncated, zero-size, padded or out-of-range one is
// corruption.
func TestNotKeptFormat(t *testing.T) {
	for _, r := range []*idem.Response{{Status: 201, NotKept: idem.MaxResponseBytes + 1}, {Status: 422, NotKept: 1 << 40}} {
		blob, enc := pack(r)
		if enc != encRaw || len(blob) > 16 || blob[0] != formatNotKept {
			t.Fatalf("%+v packed as %s, %d bytes (%x)", r, enc, len(blob), blob)
		}
		got, err := unpackInline(tagInline(blob, enc))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("%+v read back as %+v, %v", r, got, err)
		}
	}
	for _, b := range [][]byte{{formatNotKept}, {formatNotKept, 0xc9, 0x01}, {formatNotKept, 0xc9, 0x01, 0},
		{formatNotKept, 0xc9, 0x01, 5, 0}, {formatNotKept, 0xe8, 0x07, 5}, {formatNotKept, 0xc9, 0x01, 0xff}} {
		if _, err := unpackInline(b); !errors.Is(err, errCorrupt) {
			t.Errorf("%x: err = %v", b, err)
		}
	}
}

// TestInlineBoundIsOneWriteUnit: a response is stored inline exactly while
// the completed record item holding it stays within 1 KB by DynamoDB's item
// size (one write unit), whatever the record's own attributes weigh.
func TestInlineBoundIsOneWriteUnit(t *testing.T) {
	now := time.Unix(1_764_720_000, 0)
	claim := idem.Record{ID: "caller:v1:" + strings.Repeat("h", 43), Digest: "jcs-sha256:" + strings.Repeat("d", 64),
		State: idem.StatePending, Owner: strings.Repeat("o", 32), Attempt: 1, RequestID: strings.Repeat("r", 36),
		RawBodySHA256: strings.Repeat("s", 64), Expires: now.Add(24 * time.Hour)}
	base := itemsize.Of(completedItem(claim, idem.StateCompleted, claim.Expires, nil)) + len(attrBlob)
	room := recordItemMax - base
	t.Logf("a typical completed record leaves %d bytes of the 1 KB for the inline response", room)
	if room < 400 {
		t.Fatalf("a typical record leaves %d bytes for an inline response, want at least 400", room)
	}
	for _, c := range []struct {
		n    int
		want bool
	}{{room, true}, {room + 1, false}} {
		inline := make([]byte, c.n)
		if got := fitsInline(claim, idem.StateCompleted, claim.Expires, inline); got != c.want {
			t.Errorf("%d-byte inline blob: fits %t, want %t", c.n, got, c.want)
		}
		item := completedItem(claim, idem.StateCompleted, claim.Expires, &responseRef{inline: inline})
		if n := itemsize.Of(item); c.want && n != recordItemMax || !c.want && n != recordItemMax+1 {
			t.Errorf("%d-byte inline blob: item %d bytes", c.n, n)
		}
	}
}

// pack encodes r and compresses it when that helps; enc names the
// encoding. The store encodes a response once (its size decides where it
// is kept) and calls packEncoded; the tests pack a Response whole.
func pack(r *idem.Response) (blob []byte, enc string) {
	return packEncoded(encodeResponse(r))
}

// TestEncodedSizeIsTheSharedMeasure: the blob a response encodes to is
// exactly the stored form idem.Outcome.Validate measures (so this store
// refuses, as too large, exactly the responses every store refuses).
func TestEncodedSizeIsTheSharedMeasure(t *testing.T) {
	long := strings.Repeat("v", 20000)
	for _, r := range []*idem.Response{
		{Status: 200},
		{Status: 204, Body: []byte{}},
		{Status: 599, Headers: map[string][]string{"X-Empty": {""}, "X-None": {}}, Body: []byte("b")},
		{Status: 201, Headers: map[string][]string{"Content-Type": {"application/json"}, "Link": {"<a>", "<b>", long}}, Body: []byte(long)},
		{Status: 200, Headers: map[string][]string{strings.Repeat("N", 200): {long, long[:127], long[:128]}}, Body: make([]byte, 1<<20)},
	} {
		if got, want := len(encodeResponse(r)), respsize.Encoded(r.Status, r.Headers, len(r.Body)); got != want {
			t.Errorf("status %d, %d header(s), %d body bytes: encoded %d bytes, measured %d", r.Status, len(r.Headers), len(r.Body), got, want)
		}
	}
}
