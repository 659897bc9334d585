package apikeys

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idemkit/idemkit/internal/ids"
)

// Credential is what an API key authenticates: its tenant and optional
// attributes. The authorizer passes every attribute to the api function as
// an authorizer context key of the same name beside tenantId, which is how
// a policy's credential parts (idem.Policy.Scope.Credential) reach it:
// the commerce policy reads namespace and worker, the ERP policy client,
// company and organisation. Attributes come only from the stored key,
// never from the request.
type Credential struct {
	// Tenant is the key's tenant (tenantId grammar). Required.
	Tenant string
	// Attrs are the key's attributes, name to value; nil for none. A name
	// is 1..64 of a-z A-Z 0-9 _ starting with a letter, and not tenantId; a
	// value is 1..256 characters of valid UTF-8 without control
	// characters. At most maxCredentialAttrs.
	Attrs map[string]string
}

// maxCredentialAttrs bounds Credential.Attrs.
const maxCredentialAttrs = 16

// ErrCredentialInvalid is matched (errors.Is) by Credential.Validate's
// errors.
var ErrCredentialInvalid = errors.New("host: invalid credential")

// Validate reports the first problem of c (wrapping ErrCredentialInvalid).
func (c Credential) Validate() error {
	if !ids.ValidTenant(c.Tenant) {
		return fmt.Errorf("%w: tenant %q does not match the tenantId grammar", ErrCredentialInvalid, c.Tenant)
	}
	if len(c.Attrs) > maxCredentialAttrs {
		return fmt.Errorf("%w: %d attributes, at most %d", ErrCredentialInvalid, len(c.Attrs), maxCredentialAttrs)
	}
	for _, n := range c.AttrNames() {
		if err := ValidAttr(n, c.Attrs[n]); err != nil {
			return err
		}
	}
	return nil
}

// ValidAttr checks one credential attribute (see Credential.Attrs).
func ValidAttr(name, value string) error {
	if !validAttrName(name) {
		return fmt.Errorf("%w: attribute name %q must be 1..64 of a-z A-Z 0-9 _ starting with a letter, and not tenantId", ErrCredentialInvalid, name)
	}
	if n := utf8.RuneCountInString(value); n < 1 || n > 256 || !utf8.ValidString(value) ||
		strings.IndexFunc(value, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: attribute %s: the value must be 1..256 characters of UTF-8 without control characters", ErrCredentialInvalid, name)
	}
	return nil
}

func validAttrName(s string) bool {
	if len(s) < 1 || len(s) > 64 || s == "tenantId" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !(letter || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return false
		}
	}
	return true
}

// AttrNames returns the attribute names, sorted.
func (c Credential) AttrNames() []string {
	out := make([]string, 0, len(c.Attrs))
	for n := range c.Attrs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (c Credential) clone() Credential {
	if c.Attrs == nil {
		return c
	}
	m := make(map[string]string, len(c.Attrs))
	for k, v := range c.Attrs {
		m[k] = v
	}
	c.Attrs = m
	return c
}
