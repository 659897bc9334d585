package canon

import (
	"mime"
	"strings"
)

// MediaType returns the media type of a request's Content-Type, lower-cased
// and without parameters ("" when there is none), for a route with a
// contract, whose bodies are UTF-8: a Content-Type that names another
// charset (ISO-8859-1 included: it is refused, never transcoded), or that
// cannot be parsed (a malformed or repeated parameter), is a
// *ValidationError, so a body is never read in a charset it was not sent
// in. The charset "utf-8" matches in any letter case, quoted or not; its
// aliases ("utf8") are refused.
func MediaType(contentType string) (string, error) {
	if strings.TrimSpace(contentType) == "" {
		return "", nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", &ValidationError{Message: "the Content-Type cannot be parsed: it must be a media type (application/json), " +
			"with parameters written name=value, each at most once"}
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return "", &ValidationError{Message: "the charset " + quote(cs) + " is not accepted: bodies are UTF-8 (charset=utf-8 or none)"}
	}
	return mt, nil
}

// quote quotes s for a message, at most 40 bytes of it.
func quote(s string) string {
	if len(s) > 40 {
		s = s[:40]
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
