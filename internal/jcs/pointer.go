package jcs

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// pointerFrame is one open container while Pointer walks the input.
type pointerFrame struct {
	object  bool
	key     string // object: name of the current member
	index   int    // array: index of the current element
	keyNext bool   // object: the next token is a member name (or '}')
}

// Pointer returns the RFC 6901 JSON Pointer of the value that starts at
// byte offset in data ("" for the top-level value, "/order/lines/1/price"
// for a member of an object inside an array), as an *Error's Offset reports
// it for ErrNumber and ErrInexactNumber. It reads data only up to that
// value, so data need not be valid beyond it; ok is false when no value
// starts at offset.
func Pointer(data []byte, offset int64) (ptr string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []pointerFrame
	// next moves the innermost container past one complete value.
	next := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].keyNext = true
			} else {
				stack[n-1].index++
			}
		}
	}
	for {
		before := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		after := dec.InputOffset()
		d, isDelim := tok.(json.Delim)
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].keyNext {
			if isDelim && d == '}' {
				stack = stack[:n-1]
				next()
				continue
			}
			stack[n-1].key, _ = tok.(string)
			stack[n-1].keyNext = false
			continue
		}
		if isDelim && d == ']' {
			stack = stack[:len(stack)-1]
			next()
			continue
		}
		// tok starts a value: it begins in (before, after].
		if before <= offset && offset < after {
			return pointerOf(stack), true
		}
		if before > offset {
			return "", false
		}
		if isDelim { // '{' or '['
			stack = append(stack, pointerFrame{object: d == '{', keyNext: d == '{'})
			continue
		}
		next()
	}
}

func pointerOf(stack []pointerFrame) string {
	var b strings.Builder
	for _, f := range stack {
		b.WriteByte('/')
		if f.object {
			b.WriteString(strings.ReplaceAll(strings.ReplaceAll(f.key, "~", "~0"), "/", "~1"))
		} else {
			b.WriteString(strconv.Itoa(f.index))
		}
	}
	return b.String()
}
