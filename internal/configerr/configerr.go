// Package configerr is the one shape of a constructor's configuration
// error: a constructor checks every field, collects each problem in a List,
// and returns one *Error naming them all. The error matches the
// constructor's package sentinel (ledger.ErrConfig, fence.ErrConfig, …)
// with errors.Is, and every error it was given with Wrap (for example
// idem's *ConfigError) stays reachable through errors.Is and errors.As.
package configerr

import (
	"fmt"
	"strings"
)

// List collects the problems found in one Config. The zero List is empty
// and ready to use.
type List struct {
	problems []string
	causes   []error
}

// Addf records one problem, worded as the field and what is wrong with it
// ("Config.Store is required").
func (l *List) Addf(format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

// Wrap records err (if not nil) as one problem, its message as is, and
// keeps err reachable through errors.Is and errors.As.
func (l *List) Wrap(err error) {
	if err == nil {
		return
	}
	l.problems = append(l.problems, err.Error())
	l.causes = append(l.causes, err)
}

// Len is the number of problems recorded.
func (l *List) Len() int { return len(l.problems) }

// Err returns nil when no problem was recorded, else an *Error listing
// every problem in the order recorded, with prefix (the package's name,
// "ledger") leading its message and matching sentinel.
func (l *List) Err(prefix string, sentinel error) error {
	if len(l.problems) == 0 {
		return nil
	}
	return &Error{prefix: prefix, sentinel: sentinel,
		problems: append([]string(nil), l.problems...), causes: append([]error(nil), l.causes...)}
}

// Error lists every problem a constructor found: "prefix: p1; p2".
// errors.Is(err, sentinel) holds, and so it does for every wrapped cause.
type Error struct {
	prefix   string
	sentinel error
	problems []string
	causes   []error
}

// Error is "prefix: problem; problem; …".
func (e *Error) Error() string { return e.prefix + ": " + strings.Join(e.problems, "; ") }

// Problems returns every problem found, in the order checked.
func (e *Error) Problems() []string { return append([]string(nil), e.problems...) }

// Is makes errors.Is(e, sentinel) true.
func (e *Error) Is(target error) bool { return target == e.sentinel }

// Unwrap returns the wrapped causes (see List.Wrap).
func (e *Error) Unwrap() []error { return e.causes }
