// Package securitytest holds the repository's cross-function security
// tests: they drive the authorizer, api, executor and auditor handlers
// together (memory stores, a loopback webhook provider) with distinctive
// secret values and assert that none of them reaches a log line, an EMF
// metric line or an error returned to a client. See docs/SECURITY.md.
//
// The package has no non-test code.
package securitytest
