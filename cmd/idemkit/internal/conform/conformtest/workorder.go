package conformtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strings"
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

// decodeWorkOrder decodes and normalises a work order of r's media type.
func decodeWorkOrder(r *http.Request, body []byte) (*workOrderBody, bool) {
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
	w, ok := decodeWorkOrder(r, body)
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
	w, ok := decodeWorkOrder(r, body)
	if !ok {
		return 400, envelopeBody("VALIDATION_ERROR", "not a work order", nil)
	}
	b, _ := json.Marshal(map[string]any{"work_order_number": w.Number, "projects_processed": len(w.Projects)})
	return 201, b
}

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
	q.w.Header().Set("Content-Type", "application/xml")
	q.w.WriteHeader(status)
	_, _ = q.w.Write(b.Bytes())
	return true
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
