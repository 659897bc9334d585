package oracle

import (
	"errors"
	"strconv"
)

// Sentinel errors, each returned wrapped in an *Error carrying the offset.
// Match them with errors.Is.
var (
	// ErrDuplicateKey: an object has two members whose names are equal after
	// unescaping.
	ErrDuplicateKey = errors.New("jcs: duplicate object key")
	// ErrLoneSurrogate: a \u escape names a UTF-16 surrogate that is not part
	// of a high-low pair.
	ErrLoneSurrogate = errors.New("jcs: lone UTF-16 surrogate in string")
	// ErrInvalidUTF8: a string contains bytes that are not valid UTF-8.
	ErrInvalidUTF8 = errors.New("jcs: invalid UTF-8 in string")
	// ErrNumber: a number cannot be represented as a finite IEEE 754 double
	// (or, from Marshal, a Go float is NaN or infinite).
	ErrNumber = errors.New("jcs: number out of range")
	// ErrTooDeep: arrays and objects are nested deeper than MaxDepth.
	ErrTooDeep = errors.New("jcs: nesting too deep")
	// ErrInexactNumber (CanonicalizeExact, Sum256Exact only): a number whose
	// canonical form has a different decimal value than the literal, because
	// no IEEE 754 double holds it exactly enough (12345678901234567890 is
	// written 12345678901234567000, 1e-400 is written 0). Two such literals
	// would share a canonical form.
	ErrInexactNumber = errors.New("jcs: number cannot be represented exactly as a double")
)

// MaxDepth is the deepest nesting of arrays and objects accepted (the same
// limit as encoding/json).
const MaxDepth = 10000

// Error is a well-formed-looking input that JCS must reject. Err is one of
// the sentinels (ErrDuplicateKey, ErrLoneSurrogate, ErrInvalidUTF8,
// ErrNumber, ErrTooDeep); Offset is the byte offset in the input where the
// offending token starts.
type Error struct {
	Offset int64
	Err    error
}

func (e *Error) Error() string {
	return e.Err.Error() + " at offset " + strconv.FormatInt(e.Offset, 10)
}

// Unwrap returns the sentinel, so errors.Is(err, ErrDuplicateKey) works.
func (e *Error) Unwrap() error { return e.Err }

// SyntaxError is input that is not JSON (RFC 8259). Offset is the byte
// offset of the first byte that could not be accepted (len(input) when the
// input ended early).
type SyntaxError struct {
	Offset int64
	Msg    string
}

func (e *SyntaxError) Error() string {
	return "jcs: syntax error at offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Msg
}
