package apikeys

import "errors"

// ErrAnswerLost is joined to the error of a write of this package one of
// whose tries was sent and got no answer (its connection lost, no answer
// in time, or a 5xx), which the SDK sent again: that try may have been
// applied. From Revoke with ErrKeyNotFound, the key is gone: that try
// deleted it, or it was gone before. With any other error the write's
// outcome is unknown.
var ErrAnswerLost = errors.New("host: a try of the write was sent and got no answer; it may have been applied")

// lostError is err with ErrAnswerLost joined, said in err's words alone
// (a command renders err as it did).
type lostError struct{ err error }

func (e lostError) Error() string   { return e.err.Error() }
func (e lostError) Unwrap() []error { return []error{e.err, ErrAnswerLost} }
