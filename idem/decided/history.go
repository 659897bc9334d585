package decided

import (
	"context"
	"encoding/json"
	"sort"
)

// FieldChange is one field of a record that changed after the version a
// write was decided against.
type FieldChange struct {
	// Field is the field's name, as the operation declares its inputs.
	Field string `json:"field"`
	// Old is the field's value at the decided version (JSON null when the
	// record had no value for it then, or when the history no longer
	// reaches back that far).
	Old json.RawMessage `json:"old"`
	// New is the field's current value (JSON null when it has none).
	New json.RawMessage `json:"new"`
	// Version is the latest version of the record that changed the field.
	Version int64 `json:"version"`
}

// History looks up how a record changed since a version: the store of the
// records an operation writes implements it (the reference host's runs
// store does). It is the only thing the offline-decision check needs from
// a store.
//
// ChangesSince returns, for every field of the record changed by a version
// after version, one FieldChange (the field's value at version and its
// current value), in any order, and the record's current version. A
// version equal to the current one returns no changes. It returns
// ErrRecordNotFound when no record of scope (the caller's tenant) has the
// id: a record of another scope is never reported, nor its existence
// revealed; and ErrVersionAhead when version is below 1 or above the
// current version (a version the record never had).
type History interface {
	ChangesSince(ctx context.Context, scope, recordID string, version int64) (changes []FieldChange, current int64, err error)
}

// Touching returns the changes that touch one of inputs (the operation's
// declared inputs), in the order of inputs; a field is matched by exact
// name. A nil result means the write may run: nothing it decided on
// changed.
func Touching(changes []FieldChange, inputs []string) []FieldChange {
	var out []FieldChange
	for _, in := range inputs {
		for _, c := range changes {
			if c.Field == in {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// VersionLog is a record's history kept as the list of its versions:
// element i holds the fields version i+1 set, each to its JSON value. A store
// that appends one element per write (atomically with the write) answers
// History.ChangesSince with Since. The record's current version is the
// log's length.
type VersionLog []map[string]json.RawMessage

// Current is the record's current version (0 for an empty log).
func (l VersionLog) Current() int64 { return int64(len(l)) }

// Since returns the changes made by the versions after version, one
// FieldChange per field sorted by field name: Old is the field's value at
// version (the last one set at or before it; JSON null if none), New its
// value now, Version the latest version that set it. ErrVersionAhead when
// version is below 1 or above Current.
func (l VersionLog) Since(version int64) ([]FieldChange, error) {
	if version < 1 || version > l.Current() {
		return nil, ErrVersionAhead
	}
	byField := map[string]*FieldChange{}
	var names []string
	for i := version; i < l.Current(); i++ {
		for f, v := range l[i] {
			c, ok := byField[f]
			if !ok {
				c = &FieldChange{Field: f, Old: l.valueAt(f, version)}
				byField[f] = c
				names = append(names, f)
			}
			c.New, c.Version = v, i+1
		}
	}
	sort.Strings(names)
	out := make([]FieldChange, 0, len(names))
	for _, n := range names {
		out = append(out, *byField[n])
	}
	return out, nil
}

// valueAt is field's value at version (JSON null if never set by then).
func (l VersionLog) valueAt(field string, version int64) json.RawMessage {
	for i := version - 1; i >= 0; i-- {
		if v, ok := l[i][field]; ok {
			return v
		}
	}
	return json.RawMessage("null")
}
