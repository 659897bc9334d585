package workorder

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/idemkit/idemkit/idem/canon"
)

// decodeXML reads a work order in XML strictly: the body is UTF-8 (no
// byte-order mark, an XML declaration naming no other encoding, no
// character reference to a surrogate, which encoding/xml would read as
// U+FFFD); one root <work_order> in no namespace; exactly the contract's
// elements (names matched byte for byte), each at most once where it is one
// value; no attribute (namespace declarations included), no element inside
// a scalar element, no text but white space between elements; no comment,
// processing instruction (but the declaration) or document type; nothing
// after the root but white space. CR LF and CR read as LF, as XML defines.
func decodeXML(body []byte) (WorkOrder, error) {
	var w WorkOrder
	if !utf8.Valid(body) {
		return w, &canon.ValidationError{Message: "the body is not valid UTF-8"}
	}
	if bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) {
		return w, &canon.ValidationError{Message: "the body starts with a byte-order mark"}
	}
	r := &xmlReader{dec: xml.NewDecoder(bytes.NewReader(body)), body: body}
	rootSeen := false
	for first := true; ; first = false {
		t, err := r.token("")
		if err == io.EOF {
			break
		}
		if err != nil {
			return w, err
		}
		switch t := t.(type) {
		case xml.ProcInst:
			if !first || t.Target != "xml" {
				return w, &canon.ValidationError{Message: "a processing instruction is not part of the work-order contract"}
			}
		case xml.CharData:
			if trim(string(t)) != "" {
				return w, &canon.ValidationError{Message: "text outside the root element"}
			}
		case xml.StartElement:
			if rootSeen {
				return w, &canon.ValidationError{Message: "a second root element"}
			}
			rootSeen = true
			if err := r.start(t, "", "work_order"); err != nil {
				return w, err
			}
			if err := r.workOrder(&w); err != nil {
				return w, err
			}
		default:
			return w, notInContract("", t)
		}
	}
	if !rootSeen && len(bytes.TrimSpace(body)) == 0 {
		return w, &canon.ValidationError{Message: "the body is empty: a work order in XML is required"}
	}
	if !rootSeen {
		return w, &canon.ValidationError{Message: "no root element"}
	}
	return w, nil
}

// xmlSyntaxMessage says in the host's words why the XML tokens could not
// be read: the document cut short, or the line of a syntax error (never
// "unexpected EOF").
func xmlSyntaxMessage(err error) string {
	var se *xml.SyntaxError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.As(err, &se) && strings.Contains(se.Msg, "unexpected EOF"):
		return "the XML ends before the work order does"
	case errors.As(err, &se):
		return fmt.Sprintf("not a work order in XML: %s (line %d)", se.Msg, se.Line)
	}
	return "the body is not valid XML"
}

// xmlReader walks the tokens of one XML document, checking the raw text of
// each so no character reference is read lossily.
type xmlReader struct {
	dec  *xml.Decoder
	body []byte
}

// token returns the next token (copied) or io.EOF; a syntax error, a
// comment, a directive or a surrogate character reference is refused.
func (r *xmlReader) token(at string) (xml.Token, error) {
	from := r.dec.InputOffset()
	t, err := r.dec.Token()
	if err == io.EOF {
		return nil, io.EOF
	}
	if err != nil {
		return nil, &canon.ValidationError{Field: at, Message: xmlSyntaxMessage(err)}
	}
	switch t := t.(type) {
	case xml.Comment, xml.Directive:
		return nil, notInContract(at, t)
	case xml.CharData:
		if err := checkCharRefs(at, r.body[from:r.dec.InputOffset()]); err != nil {
			return nil, err
		}
	}
	return xml.CopyToken(t), nil
}

// start checks an element is the one expected: its name in no namespace
// and no attribute.
func (r *xmlReader) start(se xml.StartElement, at, want string) error {
	if se.Name.Space != "" || se.Name.Local != want {
		return &canon.ValidationError{Field: at, Message: fmt.Sprintf("element <%s> is not part of the work-order contract here (want <%s> in no namespace)", name(se.Name), want)}
	}
	if len(se.Attr) > 0 {
		return &canon.ValidationError{Field: at + "/" + want, Message: fmt.Sprintf("attribute %q is not part of the work-order contract", name(se.Attr[0].Name))}
	}
	return nil
}

// children reads the children of a container element up to its end: white
// space between them is ignored, any other text refused; child is called
// with each child's start element.
func (r *xmlReader) children(at string, child func(se xml.StartElement) error) error {
	for {
		t, err := r.token(at)
		if err != nil {
			if err == io.EOF {
				return &canon.ValidationError{Field: at, Message: "unexpected end of the XML document"}
			}
			return err
		}
		switch t := t.(type) {
		case xml.EndElement:
			return nil
		case xml.CharData:
			if trim(string(t)) != "" {
				return &canon.ValidationError{Field: at, Message: "text between elements is not part of the work-order contract"}
			}
		case xml.StartElement:
			if err := child(t); err != nil {
				return err
			}
		default:
			return notInContract(at, t)
		}
	}
}

// scalar reads the text of a scalar element up to its end: an element
// inside it is refused.
func (r *xmlReader) scalar(at string) (string, error) {
	var b []byte
	for {
		t, err := r.token(at)
		if err != nil {
			if err == io.EOF {
				return "", &canon.ValidationError{Field: at, Message: "unexpected end of the XML document"}
			}
			return "", err
		}
		switch t := t.(type) {
		case xml.EndElement:
			return string(b), nil
		case xml.CharData:
			b = append(b, t...)
		case xml.StartElement:
			return "", &canon.ValidationError{Field: at, Message: fmt.Sprintf("element <%s> inside a scalar element", name(t.Name))}
		default:
			return "", notInContract(at, t)
		}
	}
}

// once reads a scalar child element at most once.
func (r *xmlReader) once(seen map[string]bool, se xml.StartElement, at string) (string, error) {
	n := se.Name.Local
	if err := r.start(se, at, n); err != nil {
		return "", err
	}
	if seen[n] {
		return "", &canon.ValidationError{Field: at + "/" + n, Message: "element given twice"}
	}
	seen[n] = true
	return r.scalar(at + "/" + n)
}

func (r *xmlReader) workOrder(w *WorkOrder) error {
	seen := map[string]bool{}
	return r.children("", func(se xml.StartElement) error {
		switch se.Name.Local {
		case "work_order_number":
			s, err := r.once(seen, se, "")
			w.Number = s
			return err
		case "projects":
			if err := r.start(se, "", "projects"); err != nil {
				return err
			}
			if seen["projects"] {
				return &canon.ValidationError{Field: "/projects", Message: "element given twice"}
			}
			seen["projects"] = true
			return r.children("/projects", func(se xml.StartElement) error {
				at := fmt.Sprintf("/projects/%d", len(w.Projects))
				if err := r.start(se, "/projects", "project"); err != nil {
					return err
				}
				p, err := r.project(at)
				w.Projects = append(w.Projects, p)
				return err
			})
		}
		return r.start(se, "", "work_order_number or projects")
	})
}

func (r *xmlReader) project(at string) (Project, error) {
	var p Project
	seen := map[string]bool{}
	err := r.children(at, func(se xml.StartElement) error {
		var s string
		var err error
		switch se.Name.Local {
		case "code":
			s, err = r.once(seen, se, at)
			p.Code = s
		case "name":
			s, err = r.once(seen, se, at)
			p.Name = s
		case "quantity":
			if s, err = r.once(seen, se, at); err == nil {
				p.Quantity, err = parseQuantity(at+"/quantity", trim(s))
			}
		default:
			return r.start(se, at, "code, name or quantity")
		}
		return err
	})
	return p, err
}

func name(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return n.Space + ":" + n.Local
}

func notInContract(at string, t xml.Token) error {
	kind := "this XML construct"
	switch t.(type) {
	case xml.Comment:
		kind = "a comment"
	case xml.Directive:
		kind = "a document type or directive"
	case xml.ProcInst:
		kind = "a processing instruction"
	}
	return &canon.ValidationError{Field: at, Message: kind + " is not part of the work-order contract"}
}

// checkCharRefs refuses a numeric character reference in raw text (not in
// a CDATA section) that names no XML character: a surrogate, which
// encoding/xml reads as U+FFFD.
func checkCharRefs(at string, raw []byte) error {
	if bytes.HasPrefix(raw, []byte("<![CDATA[")) {
		return nil
	}
	for {
		i := bytes.Index(raw, []byte("&#"))
		if i < 0 {
			return nil
		}
		raw = raw[i+2:]
		end := bytes.IndexByte(raw, ';')
		if end < 0 {
			return nil // the decoder has refused it already
		}
		digits, base := string(raw[:end]), 10
		if len(digits) > 0 && digits[0] == 'x' {
			digits, base = digits[1:], 16
		}
		n, err := strconv.ParseUint(digits, base, 32)
		if err != nil || n >= 0xD800 && n <= 0xDFFF || n > utf8.MaxRune {
			return &canon.ValidationError{Field: at, Message: "a character reference names no character: &#" + string(raw[:min(end, 12)]) + ";"}
		}
		raw = raw[end+1:]
	}
}
