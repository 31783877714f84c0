package sifensim

// The synchronous services of SIFEN besides siConsDE (manual técnico v150,
// §9.1, §9.5, §9.6): one DE (siRecepDE), an event (siRecepEvento) and a
// RUC (siConsRUC).

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"net/http"
	"slices"
	"strings"
)

type envioDE struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviDe"`
	XDE     struct {
		Inner []byte `xml:",innerxml"`
	} `xml:"xDE"`
}

type consRUC struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsRUC"`
	RUC     string   `xml:"dRUCCons"`
}

type envioEvento struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviEventoDe"`
	Reg     struct {
		Group struct {
			Events []gesEve `xml:"http://ekuatia.set.gov.py/sifen/xsd rGesEve"`
		} `xml:"http://ekuatia.set.gov.py/sifen/xsd gGroupGesEve"`
	} `xml:"dEvReg"`
}

// gesEve is one rGesEve: the event (rEve, its Id and its type group) and
// its signature.
type gesEve struct {
	Eve struct {
		ID    string `xml:"Id,attr"`
		Types struct {
			Any []struct {
				XMLName xml.Name
				CDC     string `xml:"http://ekuatia.set.gov.py/sifen/xsd Id"`
			} `xml:",any"`
		} `xml:"http://ekuatia.set.gov.py/sifen/xsd gGroupTiEvt"`
	} `xml:"http://ekuatia.set.gov.py/sifen/xsd rEve"`
	Signature *struct{} `xml:"http://www.w3.org/2000/09/xmldsig# Signature"`
}

// recepcionDE serves siRecepDE: one DE, received with the RUC rules of a lot
// of one (DNIT blocks "la recepción de documentos por RUC emisor", whichever
// service carries them) and processed at once, answered in rRetEnviDe/rProtDe.
// A DE the RUC rules refuse is Rechazado with 0301 and the reason (no code is
// published for it).
func (s *Server) recepcionDE(w http.ResponseWriter, r *http.Request, env string, req *envioDE, size int) {
	des, err := readLot(slices.Concat([]byte(`<rLoteDE xmlns="`+nsSIFEN+`">`), stripDecl(req.XDE.Inner), []byte(`</rLoteDE>`)))
	if err != nil || len(des) != 1 {
		s.malformed(w, ServiceRecepcionDE, env)
		return
	}
	code, msg, number := s.decide(env, des, "", size)
	v := verdict{cdc: des[0].CDC, status: ResultRejected, code: code, msg: msg}
	if number != "" {
		s.mu.Lock()
		l := s.lots[number]
		if l.verdicts == nil {
			s.process(l)
		}
		v = l.verdicts[0]
		s.mu.Unlock()
	}
	s.count(ServiceRecepcionDE, env, des[0].RUC, v.code)
	now := s.release(r, number, nil)
	writeXML(w, http.StatusOK, answer(g("rRetEnviDe", g("rProtDe", v.fields(t("id", v.cdc), t("dFecProc", now.Format(timeLayout)))...))))
}

func stripDecl(b []byte) []byte {
	b = bytes.TrimPrefix(bytes.TrimSpace(b), []byte("\xef\xbb\xbf"))
	if _, rest, ok := bytes.Cut(b, []byte("?>")); ok && bytes.HasPrefix(b, []byte("<?xml")) {
		return bytes.TrimSpace(rest)
	}
	return b
}

// consultaRUC serves siConsRUC. The simulator keeps no registry of
// taxpayers: a RUC of 5 to 8 digits (without check digit, Schema XML 15)
// is found (0502), active (ACT) and an electronic issuer; any other
// value is 0500.
func (s *Server) consultaRUC(w http.ResponseWriter, _ *http.Request, env string, req *consRUC, _ int) {
	ruc, code, fields := "", CodeRUCNotFound, []el{t("dCodRes", CodeRUCNotFound), t("dMsgRes", "RUC no existe")}
	if v := strings.TrimSpace(req.RUC); len(v) >= 5 && len(v) <= 8 && allDigits(v) {
		ruc, code = v, CodeRUCFound
		fields = []el{t("dCodRes", code), t("dMsgRes", "RUC encontrado"), g("xContRUC",
			t("dRUCCons", ruc), t("dRazCons", "CONTRIBUYENTE DE PRUEBA "+ruc), t("dCodEstCons", "ACT"),
			t("dDesEstCons", "ACTIVO"), t("dRUCFactElec", "S"))}
	}
	s.count(ServiceConsultaRUC, env, ruc, code)
	writeXML(w, http.StatusOK, answer(g("rResEnviConsRUC", fields...)))
}

// recepcionEvento serves siRecepEvento: each rGesEve gets a gResProcEVe,
// registered (0600, a dProtAut) unless it names a DE not approved in the
// environment (CodeEventCDCNotFound) or is unsigned in prod (0141). Events
// change nothing else: a cancelled DE is still found by siConsDE.
func (s *Server) recepcionEvento(w http.ResponseWriter, _ *http.Request, env string, req *envioEvento, _ int) {
	events := req.Reg.Group.Events
	if len(events) == 0 {
		s.malformed(w, ServiceEvento, env)
		return
	}
	now := s.lockDue()
	fields := []el{t("dFecProc", now.Format(timeLayout))}
	for _, ev := range events {
		cdc := ""
		for _, a := range ev.Eve.Types.Any {
			if c := strings.TrimSpace(a.CDC); c != "" {
				cdc = c
				break
			}
		}
		v, c := verdict{status: ResultRejected}, cmp.Or(s.cdcs[key{env, cdc}], &cdcState{})
		switch {
		case env == "prod" && ev.Signature == nil:
			v.code, v.msg = "0141", "Firma digital ausente"
		case cdc != "" && !c.approved:
			v.code, v.msg = CodeEventCDCNotFound, "CDC "+cdc+" inexistente o no aprobado"
		default:
			v = verdict{status: ResultApproved, code: CodeEventRegistered, msg: "Evento registrado correctamente", aut: next(&s.nextAut)}
		}
		res := v.fields()
		fields = append(fields, g("gResProcEVe", slices.Insert(res, len(res)-1, t("id", strings.TrimSpace(ev.Eve.ID)))...))
		s.stats[Count{Service: ServiceEvento, Env: env, RUC: c.ruc, Code: v.code}]++
	}
	s.mu.Unlock()
	writeXML(w, http.StatusOK, answer(g("rRetEnviEventoDe", fields...)))
}
