package contentcoding

import (
	"bytes"
	"compress/gzip"
	"strings"
	"testing"
)

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return z.Bytes()
}

// Decode reads what it is documented to read and refuses the rest: a
// coding it does not read, a body cut short, and a body that inflates
// past the limit (read no further than the limit), whatever its size
// compressed.
func TestDecodeRefusesWhatItCannotReadWhole(t *testing.T) {
	env := []byte(`{"error":"validation_error"}`)
	for _, c := range []struct {
		name    string
		body    []byte
		codings string
		limit   int
		want    []byte
	}{
		{"no coding", env, "", 64, env},
		{"identity", env, "identity", 64, env},
		{"gzip in any case", gz(t, env), " GZip ", 64, env},
		{"exactly the limit", gz(t, env), "gzip", len(env), env},
	} {
		if got, ok := Decode(c.body, c.codings, c.limit); !ok || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %q %v, want %q", c.name, got, ok, c.want)
		}
	}
	bomb := gz(t, []byte(strings.Repeat("0", 8<<20)))
	for _, c := range []struct {
		name    string
		body    []byte
		codings string
		limit   int
	}{
		{"br", env, "br", 64},
		{"zstd after gzip", gz(t, env), "gzip, zstd", 64},
		{"cut short", gz(t, env)[:20], "gzip", 64},
		{"not gzip", env, "gzip", 64},
		{"one byte past the limit", gz(t, env), "gzip", len(env) - 1},
		{"8 MB from a small body", bomb, "gzip", 1 << 20},
	} {
		if got, ok := Decode(c.body, c.codings, c.limit); ok {
			t.Errorf("%s: decoded %d bytes, want refused", c.name, len(got))
		}
	}
}
