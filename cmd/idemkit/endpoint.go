package main

import (
	"errors"
	"flag"
	"net/url"
)

// checkEndpoint says what is wrong with a DynamoDB endpoint: it must be an
// http:// or https:// URL with a host ("" is no endpoint, and no error).
func checkEndpoint(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an http:// or https:// URL, such as http://127.0.0.1:8000")
	}
	return nil
}

// endpointValue is a DynamoDB endpoint flag, checked (checkEndpoint) when
// the flags are parsed, so a bad one is a usage error before any request.
type endpointValue struct{ p *string }

func (v endpointValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v endpointValue) Set(s string) error {
	if err := checkEndpoint(s); err != nil {
		return err
	}
	*v.p = s
	return nil
}

// endpointFlag defines a DynamoDB endpoint flag on fs (default "": none);
// a backquoted word in usage names its value in the flag list.
func endpointFlag(fs *flag.FlagSet, name, usage string) *string {
	p := new(string)
	fs.Var(endpointValue{p}, name, usage)
	return p
}

// shownURL is an endpoint or API URL as a message prints it: a password
// given in it (http://user:PASS@host) replaced by "xxxxx", since the
// message goes to stderr, a CI log or a shared terminal (RED_TEAM 434).
func shownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
