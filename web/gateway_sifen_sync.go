package web

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/balde-throttle/balde/sifen"
)

// receiveDE is siRecepDE: one DE, gated and held as a lot of one
// (sifen.Sender.SendNewDE), SIFEN's protocol answered as rRetEnviDe.
func (g *sifenGateway) receiveDE(w http.ResponseWriter, r *http.Request, data []byte) error {
	req, err := soapBody[sifen.EnvioDE](data)
	if err != nil {
		return fmt.Errorf("%w: not a siRecepDE request (rEnviDe)", errBadRequest)
	}
	if err := sifen.CheckMessageSize(len(data)); err != nil {
		return fmt.Errorf("%w: %w", errBadRequest, err)
	}
	// The rDE may take SIFEN's namespace from rEnviDe: an rLoteDE in that
	// namespace around it lets the parser make it standalone.
	var doc bytes.Buffer
	doc.WriteString(`<rLoteDE xmlns="` + sifen.Namespace + `">`)
	doc.Write(bytes.TrimSpace(sifen.StripXMLDecl([]byte(req.XDE))))
	doc.WriteString(`</rLoteDE>`)
	lot, err := sifen.ParseLote(doc.Bytes())
	switch {
	case err != nil:
		return fmt.Errorf("%w: xDE: %w", errBadRequest, err)
	case len(lot.DEs) != 1:
		return fmt.Errorf("%w: xDE holds %d DEs; siRecepDE takes one (send a lot with siRecepLoteDE)", errBadRequest, len(lot.DEs))
	}
	call := callOf(r)
	call.target = lotTarget(sifen.ServiceRecepcionDE, g.env, lot)
	var sent sifen.DESend
	out, err := g.admit(r, func() (sifen.LotSend, error) {
		var err error
		sent, err = g.sender.SendNewDE(r.Context(), g.env, lot.DEs[0])
		return sent.LotSend, err
	})
	if err != nil {
		return err
	}
	p := sent.Prot
	call.outcome.Set("state", p.State())
	if strings.TrimSpace(p.CDC) == "" {
		p.CDC = lot.DEs[0].CDC
	}
	prot := sifenEl("rProtDe", sifenText("id", p.CDC), sifenText("dFecProc", formatSifenTime(out.ProcessedAt)),
		sifenText("dEstRes", p.State()))
	if p.AuthNumber != "" {
		prot.children = append(prot.children, sifenText("dProtAut", p.AuthNumber))
	}
	for _, m := range p.Results {
		prot.children = append(prot.children, sifenEl("gResProc", sifenText("dCodRes", m.Code), sifenText("dMsgRes", m.Message)))
	}
	writeAnswer(w, sifenEl("rRetEnviDe", prot))
	return nil
}

// passThrough forwards a request of a service balde does not gate
// (docs/decisions/0121) byte for byte to SIFEN once check accepts it, and
// SIFEN's answer byte for byte back.
func (g *sifenGateway) passThrough(w http.ResponseWriter, r *http.Request, data []byte, service, path string, check func([]byte) error) error {
	if g.client == nil {
		return fmt.Errorf("%w: %s is not passed through by this gateway (no SIFEN client configured)", errNotImplemented, service)
	}
	if service == sifen.ServiceEvento {
		callOf(r).target = "service=" + service + "&env=" + string(g.env)
	}
	if err := check(data); err != nil {
		return fmt.Errorf("%w: not a %s request: %v", errBadRequest, service, err)
	}
	ans, err := g.client.Forward(r.Context(), g.env, path, r.Header.Get("Content-Type"), data)
	if err != nil {
		return upstream("SIFEN did not answer "+service, false, err)
	}
	if ans.ContentType != "" {
		w.Header().Set("Content-Type", ans.ContentType)
	}
	w.WriteHeader(ans.StatusCode)
	_, _ = w.Write(ans.Body)
	return nil
}

const digits = "0123456789"

// soapBody decodes a SOAP 1.2 envelope whose body holds a T
// (sifen.UnmarshalSOAP); a fault is no request.
func soapBody[T any](data []byte) (*T, error) {
	req, fault, err := sifen.UnmarshalSOAP[T](data)
	if err == nil && fault != nil {
		err = errors.New("the body holds a SOAP fault")
	}
	return req, err
}

// checkConsultaDE accepts rEnviConsDeRequest naming a 44-digit CDC.
func checkConsultaDE(data []byte) error {
	req, err := soapBody[sifen.ConsultaDE](data)
	if err != nil {
		return err
	}
	if cdc := strings.TrimSpace(req.CDC); len(cdc) != 44 || strings.Trim(cdc, digits) != "" {
		return fmt.Errorf("dCDC %q is not a CDC of 44 digits", cdc)
	}
	return nil
}

// checkConsultaRUC accepts rEnviConsRUC naming a RUC of 5 to 8 digits
// without check digit (manual técnico v150, Schema XML 15, RSch03).
func checkConsultaRUC(data []byte) error {
	req, err := soapBody[struct {
		XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviConsRUC"`
		RUC     string   `xml:"dRUCCons"`
	}](data)
	if err != nil {
		return err
	}
	if ruc := strings.TrimSpace(req.RUC); len(ruc) < 5 || len(ruc) > 8 || strings.Trim(ruc, digits) != "" {
		return fmt.Errorf("dRUCCons %q is not a RUC of 5 to 8 digits without check digit", ruc)
	}
	return nil
}

// checkEvento accepts rEnviEventoDe holding at least one event (rGesEve),
// each signed (ds:Signature), unless unsigned events are allowed (test).
func (g *sifenGateway) checkEvento(data []byte) error {
	req, err := soapBody[struct {
		XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviEventoDe"`
		Events  []struct {
			Eve struct {
				ID string `xml:"Id,attr"`
			} `xml:"http://ekuatia.set.gov.py/sifen/xsd rEve"`
			Signature *struct{} `xml:"http://www.w3.org/2000/09/xmldsig# Signature"`
		} `xml:"dEvReg>gGroupGesEve>rGesEve"`
	}](data)
	if err != nil {
		return err
	}
	if len(req.Events) == 0 {
		return fmt.Errorf("dEvReg holds no event (rGesEve)")
	}
	for i, ev := range req.Events {
		if ev.Signature == nil && !g.unsigned {
			return fmt.Errorf("event %d (rEve Id %q) is not signed (no ds:Signature): SIFEN rejects it", i+1, ev.Eve.ID)
		}
	}
	return nil
}
