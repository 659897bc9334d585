package idem

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestOfferedCodingsUnderEverySpelling: an event holding Accept-Encoding
// under two spellings has the codings the Guard cannot undo taken out of
// each before its handler reads it, so a handler that reads either
// spelling encodes its answer in a coding the Guard reads (RED_TEAM 383).
// Failed before: only the spelling Go's map order met first was
// rewritten, and the other still offered br.
func TestOfferedCodingsUnderEverySpelling(t *testing.T) {
	for i := 0; i < 32; i++ {
		v2 := offeredV2(events.APIGatewayV2HTTPRequest{Headers: map[string]string{"Accept-Encoding": "br", "accept-encoding": "br, gzip"}})
		v1 := offeredV1(events.APIGatewayProxyRequest{
			Headers:           map[string]string{"Accept-Encoding": "br", "accept-encoding": "br, gzip"},
			MultiValueHeaders: map[string][]string{"Accept-Encoding": {"br"}, "accept-encoding": {"br", "gzip"}},
		})
		for _, h := range []map[string]string{v2.Headers, v1.Headers} {
			for k, v := range h {
				if offered, changed := offeredCodings(v); changed {
					t.Fatalf("send %d: %s still offers %q (the Guard would offer %q)", i, k, v, offered)
				}
			}
		}
		for k, vs := range v1.MultiValueHeaders {
			for _, v := range vs {
				if offered, changed := offeredCodings(v); changed {
					t.Fatalf("send %d: multi-value %s still offers %q (the Guard would offer %q)", i, k, v, offered)
				}
			}
		}
	}
}
