package sifen

import (
	"encoding/xml"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// codeAuthorized is an approved DE's dCodRes (manual técnico v150, §12.3.1.3).
const codeAuthorized = "0260"

// result reads r as DNIT writes it, dEstRes without regard to case, accents,
// spacing or plural, and returns the canonical dEstRes: resultApproved,
// ResultApprovedWithObs or resultRejected. When dEstRes is none of the
// three, codeAuthorized among its codes approves; anything else is "", a
// result balde cannot read, never a silent rejection (a resend of an
// approved CDC draws 1001): the document stays sent, its lot queried again;
// once SIFEN no longer answers for it (0364) its CDC is asked for (siConsDE)
// instead (docs/decisions/0055).
func (r DEResult) result() string {
	switch foldResult(r.Status) {
	case "aprobado":
		return resultApproved
	case "aprobado con observacion", "aprobado con observaciones":
		return ResultApprovedWithObs
	case "rechazado":
		return resultRejected
	}
	if slices.ContainsFunc(r.Messages, func(m ResultMessage) bool { return strings.TrimSpace(m.Code) == codeAuthorized }) {
		return resultApproved
	}
	return ""
}

// approved reports whether a canonical dEstRes approves the DE (with or
// without observations).
func approved(result string) bool { return result == resultApproved || result == ResultApprovedWithObs }

// foldResult lowercases s, removes its accents and collapses its spaces.
func foldResult(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if unicode.Is(unicode.Mn, r) {
			continue // a combining accent
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// lotResultSettle is what a processed lot's result r says of doc, and whether
// it changes anything: approved (dProtAut, observations in the message),
// rejected (SIFEN's codes and messages), or, unreadable, still sent with a
// message (false when doc has that message already).
func lotResultSettle(doc Document, r DEResult) (Settle, bool) {
	res := r.result()
	st := Settle{Status: StatusRejected, Message: resultText(r), Result: res}
	if len(r.Messages) > 0 {
		st.ResponseCode = r.Messages[0].Code
	}
	switch {
	case approved(res):
		st.Status, st.AuthNumber = StatusApproved, strings.TrimSpace(r.AuthNumber)
	case res == "":
		st.Status = StatusSent
		st.Message = fmt.Sprintf("SIFEN answered a result balde cannot read (%s): not taken as approved or rejected; the lot is queried again, and once SIFEN no longer answers for it (48 h) the DE is asked for by CDC",
			resultText(r))
		return st, st.Message != doc.Message
	}
	return st, true
}

// AuthNumber returns dProtAut from xContenDE of a 0422 answer, "" if none.
// xContenDE carries rContDe (the DE, its dProtAut and events) as elements
// or as text (escaped XML or CDATA), with or without the rContDe element;
// the first dProtAut outside rDE and xContEv is taken.
func (r ConsultaDEResponse) AuthNumber() string {
	return authNumber(string(r.Content), 0)
}

// authNumber searches content for dProtAut, and text that is XML in turn.
func authNumber(content string, depth int) string {
	if depth > 2 {
		return ""
	}
	d := xml.NewDecoder(strings.NewReader(content))
	d.Strict = false
	var path []string
	for {
		tok, err := d.Token()
		if err != nil {
			return ""
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			path = append(path, tk.Name.Local)
			if tk.Name.Local == "dProtAut" && !inside(path[:len(path)-1]) {
				var v string
				if err := d.DecodeElement(&v, &tk); err != nil {
					return ""
				}
				path = path[:len(path)-1]
				if v = strings.TrimSpace(v); isDigits(v) {
					return v
				}
			}
		case xml.EndElement:
			if len(path) > 0 {
				path = path[:len(path)-1]
			}
		case xml.CharData:
			if text := strings.TrimSpace(string(tk)); strings.HasPrefix(text, "<") && !inside(path) {
				if v := authNumber(text, depth+1); v != "" {
					return v
				}
			}
		}
	}
}

// inside reports whether path passes through rDE or xContEv.
func inside(path []string) bool {
	return slices.ContainsFunc(path, func(p string) bool { return p == "rDE" || p == "xContEv" })
}
