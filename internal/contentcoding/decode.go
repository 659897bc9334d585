// Package contentcoding undoes the HTTP content codings the standard
// library reads (RFC 9110 gzip, x-gzip and deflate), so that an answer's
// error code can be read from a body a compression middleware or gateway
// encoded. It is used only to classify answers: the bytes sent or kept are
// never the decoded ones.
package contentcoding

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"strings"
)

// Decode undoes the content codings listed in codings (a Content-Encoding
// value: the codings in the order they were applied, so undone last to
// first) on body. ok is false for a coding it does not read (br, zstd,
// compress), a body that does not decode (one cut short among them), or
// one that decodes past limit bytes: a body that inflates past what an
// error envelope needs is never read whole.
func Decode(body []byte, codings string, limit int) (_ []byte, ok bool) {
	list := strings.Split(codings, ",")
	for i := len(list) - 1; i >= 0; i-- {
		var r io.Reader
		switch c := strings.ToLower(strings.TrimSpace(list[i])); c {
		case "", "identity":
			continue
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				return nil, false
			}
			r = zr
		case "deflate":
			// RFC 9110's deflate is the zlib format; some servers send
			// the raw deflate stream.
			if zr, err := zlib.NewReader(bytes.NewReader(body)); err == nil {
				r = zr
			} else {
				r = flate.NewReader(bytes.NewReader(body))
			}
		default:
			return nil, false
		}
		out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil || len(out) > limit {
			return nil, false
		}
		body = out
	}
	return body, true
}
