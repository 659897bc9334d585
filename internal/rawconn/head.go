package rawconn

import (
	"net/http"
)

// Head is one request's header block as received: the request line and
// the header lines, whitespace and folding kept.
type Head struct {
	// Method, Target and Proto are the request line's three parts.
	Method, Target, Proto string

	fields []field
	// contentLength is the body's length (-1: chunked).
	contentLength int64
	chunked       bool
	size          int // bytes of the block, for the queue's bound
}

// field is one header line: its name and its value after the colon, as
// received; folded when continuation lines follow it.
type field struct {
	name, value string
	folded      bool
}

// Values returns the values of the header name (any case) as received, in
// order: each line's value after the colon with only the one space after
// the colon removed, any other whitespace kept. ErrFolded when a line of
// name is folded onto the next (its value is then not one line's).
func (h *Head) Values(name string) ([]string, error) {
	var out []string
	for _, f := range h.fields {
		if !asciiEqualFold(f.name, name) {
			continue
		}
		if f.folded {
			return nil, ErrFolded
		}
		v := f.value
		if len(v) > 0 && v[0] == ' ' {
			v = v[1:]
		}
		out = append(out, v)
	}
	return out, nil
}

// matches reports whether h is the header block of r: the same request
// line and the same body framing as net/http parsed.
func (h *Head) matches(r *http.Request) bool {
	if h.Method != r.Method || h.Target != r.RequestURI || h.Proto != r.Proto {
		return false
	}
	chunked := len(r.TransferEncoding) > 0 && r.TransferEncoding[0] == "chunked"
	if h.chunked || chunked {
		return h.chunked && chunked
	}
	return r.ContentLength == h.contentLength
}
