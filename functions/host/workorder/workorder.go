// Package workorder is the inbound work-order contract of the ERP service's
// policy: a work order and its projects, decoded from JSON or XML
// (encoding/xml), normalised and validated, as the idem.Contract of the
// work-order routes. Semantically equal JSON and XML bodies decode to equal
// values, so they share the ERP policy's canonical request hash.
package workorder

import (
	"encoding/xml"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/canon"
)

// Routes of the ERP service's inbound work orders: the live route (under
// Idempotency-Key) and the public format-validation test route (no key,
// no idempotency record).
const (
	RouteLive = "POST /api/v1/inbound/work-orders"
	RouteTest = "POST /api/v1/inbound/work-orders/test"
)

// Version is the endpoint contract version, part of the canonical hash.
const Version = "inbound-work-orders/v1"

// WorkOrder is one inbound work order. In XML it is
// <work_order><work_order_number>…</work_order_number><projects><project>…</project></projects></work_order>.
type WorkOrder struct {
	XMLName  xml.Name  `json:"-" xml:"work_order"`
	Number   string    `json:"work_order_number" xml:"work_order_number"`
	Projects []Project `json:"projects" xml:"projects>project"`
}

// Project is one project of a work order.
type Project struct {
	Code     string `json:"code" xml:"code"`
	Name     string `json:"name" xml:"name"`
	Quantity int    `json:"quantity" xml:"quantity"`
}

// Contract is the work-order routes' idem.Contract: Decode takes
// application/json (or no Content-Type) and application/xml or text/xml;
// Render answers in XML when the request's Accept prefers it.
func Contract() *idem.Contract {
	return &idem.Contract{Version: Version, Decode: Decode, Render: Render}
}

// Decode decodes a work order of mediaType, normalises it and validates
// it. It reads strictly (decodeJSON, decodeXML): what the contract does not
// define is a *canon.ValidationError, in JSON and XML alike, so two
// different work orders never decode to one value and share a canonical
// hash. It normalises only what docs/POLICIES.md states as equivalent:
// surrounding ASCII white space (space, tab, CR, LF) trimmed from every
// string, project codes upper-cased by ASCII rules only. The body is
// UTF-8; a charset parameter is checked by the caller (canon.MediaType).
func Decode(mediaType string, body []byte) (any, error) {
	var w WorkOrder
	var err error
	switch mediaType {
	case "", "application/json":
		w, err = decodeJSON(body)
	case "application/xml", "text/xml":
		w, err = decodeXML(body)
	default:
		return nil, fmt.Errorf("%w: %s", idem.ErrUnsupportedMediaType, mediaType)
	}
	if err != nil {
		return nil, err
	}
	w.Number = trim(w.Number)
	for i := range w.Projects {
		p := &w.Projects[i]
		p.Code = upperASCII(trim(p.Code))
		p.Name = trim(p.Name)
	}
	if err := w.validate(); err != nil {
		return nil, err
	}
	return w, nil
}

func (w WorkOrder) validate() error {
	if w.Number == "" {
		return &canon.ValidationError{Field: "/work_order_number", Message: "work_order_number is required"}
	}
	if err := xmlText("/work_order_number", w.Number); err != nil {
		return err
	}
	if len(w.Projects) == 0 {
		return &canon.ValidationError{Field: "/projects", Message: "at least one project is required"}
	}
	for i, p := range w.Projects {
		if err := xmlText(fmt.Sprintf("/projects/%d/code", i), p.Code); err != nil {
			return err
		}
		if err := xmlText(fmt.Sprintf("/projects/%d/name", i), p.Name); err != nil {
			return err
		}
		switch {
		case p.Code == "":
			return &canon.ValidationError{Field: fmt.Sprintf("/projects/%d/code", i), Message: "code is required"}
		case p.Quantity <= 0:
			return &canon.ValidationError{Field: fmt.Sprintf("/projects/%d/quantity", i), Message: "quantity must be positive"}
		}
	}
	return nil
}

// ErrNotWorkOrder is returned by From for a context value that is not a
// decoded work order.
var ErrNotWorkOrder = errors.New("workorder: not a decoded work order")

// From returns the work order idem decoded for the handler
// (idem.DecodedRequest), or decodes body itself.
func From(v any, ok bool, mediaType string, body []byte) (WorkOrder, error) {
	if ok {
		if w, isWO := v.(WorkOrder); isWO {
			return w, nil
		}
		return WorkOrder{}, ErrNotWorkOrder
	}
	d, err := Decode(mediaType, body)
	if err != nil {
		return WorkOrder{}, err
	}
	return d.(WorkOrder), nil
}

// xmlText refuses a string holding a character XML 1.0 cannot carry, even
// as a character reference: a control character other than tab, LF and CR,
// U+FFFE and U+FFFF. The XML decoder refuses them already; a JSON \u
// escape can spell them, and JSON and XML are two spellings of one work
// order, so a work order with one has no XML spelling and an answer
// rendered in XML could not name it (RED_TEAM 358).
func xmlText(field, s string) error {
	for _, r := range s {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF {
			return &canon.ValidationError{Field: field, Message: fmt.Sprintf("U+%04X is not a character of the work-order contract (XML cannot carry it)", r)}
		}
	}
	return nil
}
