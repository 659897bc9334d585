// Package stranger gives a test's fake HTTP servers (the counting fake
// provider, the fault-injecting receiver) a per-server token, so that they
// count only the requests of the test that started them: a loopback port
// freed by one test and reused by another can carry the other test's
// requests, and a server that counted those would report effects that
// never happened. A request without the token is a stranger's: it is not
// counted, it is answered 404, and it is described (method, path and
// headers, secrets masked) so the test can report it.
package stranger

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/idemkit/idemkit/internal/keyhash"
)

// Token returns a fresh path prefix, "/t-" and 16 hex digits.
func Token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "/t-" + hex.EncodeToString(b)
}

// Own reports whether r's path is under prefix (a Token).
func Own(r *http.Request, prefix string) bool {
	return r.URL.Path == prefix || strings.HasPrefix(r.URL.Path, prefix+"/")
}

// secret headers are never printed; an Idempotency-Key is printed as its
// keyed hash only.
var secret = map[string]bool{"Authorization": true, "Cookie": true, "Proxy-Authorization": true, "X-Api-Key": true}

// Describe is r as a test reports a stranger: method, path and headers,
// sorted, with credentials masked and keys hashed.
func Describe(r *http.Request) string {
	names := make([]string, 0, len(r.Header))
	for n := range r.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Method, r.URL.Path)
	for _, n := range names {
		v := strings.Join(r.Header[n], ", ")
		switch {
		case secret[n]:
			v = "[masked]"
		case n == "Idempotency-Key":
			v = "hash " + keyhash.Log(v)
		}
		fmt.Fprintf(&b, "; %s: %s", n, v)
	}
	return b.String()
}
