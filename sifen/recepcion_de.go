package sifen

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// SIFEN's synchronous services (manual técnico v150, §7.10 and §9): one DE
// (siRecepDE), an event (siRecepEvento) and a RUC (siConsRUC).
const (
	RecepcionDEPath = "/de/ws/sync/recibe.wsdl"
	EventoPath      = "/de/ws/eventos/evento.wsdl"
	ConsultaRUCPath = "/de/ws/consultas/consulta-ruc.wsdl"

	ServiceRecepcionDE = "siRecepDE"
	ServiceEvento      = "siRecepEvento"
	ServiceConsultaRUC = "siConsRUC"
)

// EnvioDE is the body of siRecepDE: xDE holds the signed rDE as XML.
type EnvioDE struct {
	XMLName xml.Name `xml:"http://ekuatia.set.gov.py/sifen/xsd rEnviDe"`
	ID      string   `xml:"dId"`
	XDE     innerXML `xml:"xDE"`
}

// ErrNoRecepcionDE is the error of a single-DE send when the Sender's
// SOAPServices do not speak siRecepDE.
var ErrNoRecepcionDE = errors.New("sifen: the SOAP client does not send single DEs (siRecepDE)")

// deReceiver is a SOAPServices that also sends one DE (siRecepDE), as
// *Client does; apart so that existing implementations stay valid.
type deReceiver interface {
	RecepcionDE(ctx context.Context, env Env, rde []byte) (ProtDE, error)
}

var _ deReceiver = (*Client)(nil)

// RecepcionDE sends one signed rDE to siRecepDE and returns SIFEN's
// protocol of it (rProtDe). Errors as RecepcionLote's.
func (c *Client) RecepcionDE(ctx context.Context, env Env, rde []byte) (ProtDE, error) {
	req := EnvioDE{ID: newRequestID(), XDE: innerXML(bytes.TrimSpace(StripXMLDecl(rde)))}
	// rRetEnviDe is the answer, on HTTP 200, or on 400 for a request SIFEN
	// refused before reading it (0160): either way SIFEN's protocol.
	_, err := call[struct{}](ctx, c, env, ServiceRecepcionDE, RecepcionDEPath, req)
	var re *RemoteError
	if errors.As(err, &re) && re.prot != nil {
		return *re.prot, nil
	}
	return ProtDE{}, err
}

// answer is SIFEN's answer to a request, as it came.
type answer struct {
	StatusCode  int
	ContentType string
	Body        []byte
}

// Forward posts body, a SOAP request the caller built, to the service at
// path in env over the client's connection and returns the answer as it
// came, for the services balde passes through (siConsDE, siConsRUC,
// siRecepEvento); an overridden path goes to the configured one. An error
// means no answer came.
func (c *Client) Forward(ctx context.Context, env Env, path, contentType string, body []byte) (answer, error) {
	return c.post(ctx, env, "forward "+cmp.Or(c.paths[path], path), path, cmp.Or(contentType, SOAPContentType), body)
}

// post sends one request to the service at path in env and returns the
// answer.
func (c *Client) post(ctx context.Context, env Env, service, path, contentType string, body []byte) (answer, error) {
	if err := env.Validate(); err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url(env, path), bytes.NewReader(body))
	if err != nil {
		return answer{}, fmt.Errorf("sifen: %s: %w", service, err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("sifen: %s: %w", service, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return answer{}, fmt.Errorf("sifen: %s: reading the answer: %w", service, err)
	}
	return answer{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: data}, nil
}

// StripXMLDecl drops a leading XML declaration and byte order mark.
func StripXMLDecl(b []byte) []byte {
	b = bytes.TrimPrefix(bytes.TrimSpace(b), []byte("\xef\xbb\xbf"))
	if bytes.HasPrefix(b, []byte("<?xml")) {
		if i := bytes.Index(b, []byte("?>")); i >= 0 {
			return b[i+2:]
		}
	}
	return b
}

// DESend is how Sender.SendNewDE ended, as a lot of one: OutcomeBlocked,
// OutcomeFailed ("error"), OutcomeUnknown (no answer or an unreadable
// protocol: "sending" until Resolve), or OutcomeSent with SIFEN's protocol
// Prot, by which the document is approved or rejected.
type DESend struct {
	LotSend
	Prot ProtDE
}

// sendDE is steps 4 and 5 of the protocol for a claimed DE.
func (s *Sender) sendDE(recv deReceiver, c claimed) (DESend, error) {
	prot, sendErr := recv.RecepcionDE(c.bg, c.out.Env, c.lot.DEs[0].XML)
	code, msg := prot.Code()
	res := DEResult{CDC: prot.CDC, Status: prot.State(), AuthNumber: prot.authNumber(), Messages: prot.Results}
	var unusable string
	if sendErr == nil && res.result() == "" {
		unusable = fmt.Sprintf("SIFEN answered a protocol balde cannot read (%q %s %s): Resolve will ask SIFEN before any resend", prot.State(), code, msg)
	}
	out, err := s.record(c, sendErr, unusable, func(out *LotSend, log *slog.Logger) Settle {
		out.Status, out.Code, out.Message, out.ProcessedAt = OutcomeSent, code, msg, parseTime(prot.ProcessedAt)
		st, _ := lotResultSettle(Document{}, res)
		st.Sent = true
		log.Info("DE answered", slog.String("result", st.Result), slog.String("code", code))
		s.answered(c, "de:"+code+":"+c.packed.Hash[:16], false)
		return st
	})
	d := DESend{LotSend: out}
	if out.Status == OutcomeSent {
		d.Prot = prot
	}
	return d, err
}
