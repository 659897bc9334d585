package conformtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem/canon"
)

// The ERP policy's live work-order route: JSON or XML bodies decoded and
// normalised, the request hash taken over the decoded work order (so equal
// JSON and XML bodies replay each other), and an answer rendered in XML
// when the request's Accept asks for it.

type workOrderBody struct {
	XMLName  xml.Name `json:"-" xml:"work_order"`
	Number   string   `json:"work_order_number" xml:"work_order_number"`
	Projects []struct {
		Code     string `json:"code" xml:"code"`
		Name     string `json:"name" xml:"name"`
		Quantity int    `json:"quantity" xml:"quantity"`
	} `json:"projects" xml:"projects>project"`
}

// decodeWorkOrder decodes and normalises a work order of r's media type:
// strictly, as the ERP policy's contract reads one (the host's own
// decoder: whatever the contract does not define is refused), or, under
// the WorkOrderLenient break, leniently (invalid UTF-8 read as U+FFFD,
// unknown, duplicate and other-case members and elements accepted, codes
// upper-cased by Unicode rules).
func (s *Server) decodeWorkOrder(r *http.Request, body []byte) (*workOrderBody, bool) {
	if s.brk.WorkOrderLenient {
		return decodeWorkOrderLeniently(r, body)
	}
	mt, err := canon.MediaType(r.Header.Get("Content-Type"))
	if err != nil {
		return nil, false
	}
	v, err := workorder.Decode(mt, body)
	if err != nil {
		return nil, false
	}
	wo := v.(workorder.WorkOrder)
	var w workOrderBody
	w.Number = wo.Number
	for _, p := range wo.Projects {
		w.Projects = append(w.Projects, struct {
			Code     string `json:"code" xml:"code"`
			Name     string `json:"name" xml:"name"`
			Quantity int    `json:"quantity" xml:"quantity"`
		}{p.Code, p.Name, p.Quantity})
	}
	return &w, true
}

// decodeWorkOrderLeniently is the WorkOrderLenient break's decoder.
func decodeWorkOrderLeniently(r *http.Request, body []byte) (*workOrderBody, bool) {
	var w workOrderBody
	ct := strings.ToLower(strings.TrimSpace(strings.Split(r.Header.Get("Content-Type"), ";")[0]))
	var err error
	if strings.HasSuffix(ct, "xml") {
		err = xml.Unmarshal(body, &w)
	} else {
		err = json.Unmarshal(body, &w)
	}
	if err != nil || strings.TrimSpace(w.Number) == "" || len(w.Projects) == 0 {
		return nil, false
	}
	w.XMLName = xml.Name{}
	w.Number = strings.TrimSpace(w.Number)
	for i := range w.Projects {
		w.Projects[i].Code = strings.ToUpper(strings.TrimSpace(w.Projects[i].Code))
		w.Projects[i].Name = strings.TrimSpace(w.Projects[i].Name)
	}
	return &w, true
}

// workOrderDigest is the canonical request hash: over the decoded work
// order (raw bytes under the WorkOrderRawDigest break, or when it does not
// decode).
func (s *Server) workOrderDigest(r *http.Request, body []byte) string {
	w, ok := s.decodeWorkOrder(r, body)
	if !ok || s.brk.WorkOrderRawDigest {
		h := sha256.Sum256(body)
		return hex.EncodeToString(h[:])
	}
	b, _ := json.Marshal(w)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// workOrder serves the live route: 201 with the normalised work order's
// number, 400 for a body that is not a work order.
func (s *Server) workOrder(r *http.Request, _ string, body []byte) (int, []byte) {
	w, ok := s.decodeWorkOrder(r, body)
	if !ok {
		return 400, envelopeBody("VALIDATION_ERROR", "not a work order", nil)
	}
	processed := 0
	for _, p := range w.Projects {
		if p.Quantity <= MaxProjectQuantity {
			processed++
		}
	}
	if processed == 0 {
		// The reference host's deterministic business answer: stored and
		// replayed like any final answer.
		return 409, envelopeBody(NoProjectProcessed, "no project of the work order was processed", nil)
	}
	b, _ := json.Marshal(map[string]any{"work_order_number": w.Number, "projects_processed": processed})
	return 201, b
}

// The reference host's work-order rule: a project above MaxProjectQuantity
// is skipped; a work order none of whose projects is processed is a
// deterministic 409 NoProjectProcessed.
const (
	MaxProjectQuantity = 10000
	NoProjectProcessed = "NO_PROJECT_PROCESSED"
)

// renderWorkOrder writes a work-order answer in XML when r's Accept asks
// for it (not under the WorkOrderIgnoresAccept break); ok is false when
// the JSON answer stands.
func (s *Server) renderWorkOrder(q *req, status int, body []byte) bool {
	if s.brk.WorkOrderIgnoresAccept || !strings.Contains(strings.ToLower(q.r.Header.Get("Accept")), "xml") {
		return false
	}
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	if status >= 400 {
		m["request_id"] = q.id
	}
	var b bytes.Buffer
	b.WriteString("<work_order_result>")
	for _, k := range []string{"work_order_number", "projects_processed", "error", "message", "request_id"} {
		if v, ok := m[k]; ok {
			b.WriteString("<" + k + ">")
			_ = xml.EscapeText(&b, []byte(strings.Trim(mustJSON(v), `"`)))
			b.WriteString("</" + k + ">")
		}
	}
	b.WriteString("</work_order_result>")
	if status >= 400 && s.brk.XMLErrorEnveloped {
		// The break: a non-JSON error is replaced by a gateway envelope,
		// its headers dropped.
		for _, h := range []string{"X-Request-ID", "Idempotency-Key", "Idempotency-Replayed", "Idempotency-Original-Request-ID"} {
			q.w.Header().Del(h)
		}
		q.w.Header().Set("Connection", "close")
		write(q.w, status, []byte(`{"error":"idemkit.http_refused","message":"refused"}`))
		return true
	}
	q.w.Header().Set("Content-Type", "application/xml")
	q.w.WriteHeader(status)
	_, _ = q.w.Write(b.Bytes())
	return true
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
