package sifen

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/tlsfiles"
)

// The real endpoints (manual técnico v150).
const (
	TestURL = "https://sifen-test.set.gov.py"
	ProdURL = "https://sifen.set.gov.py"

	RecepcionPath    = "/de/ws/async/recibe-lote.wsdl"
	ConsultaLotePath = "/de/ws/consultas/consulta-lote.wsdl"
	ConsultaPath     = "/de/ws/consultas/consulta.wsdl"

	// defaultTimeout bounds one request to SIFEN.
	defaultTimeout = 60 * time.Second
	// maxResponseBytes bounds what the client reads of an answer.
	maxResponseBytes = 8 << 20
)

// ClientConfig says where SIFEN is and how to reach it. The zero value
// reaches the real SIFEN without the client certificate it requires.
type ClientConfig struct {
	// BaseURL, when set, replaces both environments' base URL, "{env}" in it
	// standing for "test" or "prod" (e.g. "http://127.0.0.1:8282/{env}").
	// TestURL and ProdURL default to this package's.
	BaseURL          string
	TestURL, ProdURL string
	// RecepcionPath, ConsultaLotePath and ConsultaPath override the services'
	// paths.
	RecepcionPath, ConsultaLotePath, ConsultaPath string
	// CertFile and KeyFile are the PEM client certificate and key for mutual
	// TLS; CAFile the PEM roots to trust (default: the system's).
	CertFile, KeyFile, CAFile string
	// Timeout bounds one request (default defaultTimeout). HTTPClient, when set,
	// is used as is, the TLS fields ignored.
	Timeout    time.Duration
	HTTPClient *http.Client
}

// Client is the bare SOAP transport to SIFEN's three services. It does not
// throttle and keeps no state: use Sender to send. Safe for concurrent use.
type Client struct {
	http  *http.Client
	cfg   ClientConfig
	paths map[string]string // a service's default path → the configured one
}

// NewClient returns a Client for cfg, loading the certificate files. A base
// URL that is not an absolute http(s) URL is an error: a send there would
// leave its documents in "sending" until Resolve.
func NewClient(cfg ClientConfig) (*Client, error) {
	orDefault(&cfg.Timeout, defaultTimeout)
	cfg.TestURL, cfg.ProdURL = cmp.Or(cfg.TestURL, TestURL), cmp.Or(cfg.ProdURL, ProdURL)
	for _, base := range []string{cfg.BaseURL, cfg.TestURL, cfg.ProdURL} {
		if err := checkBaseURL(base); err != nil {
			return nil, err
		}
	}
	hc := cfg.HTTPClient
	if hc == nil {
		var err error
		if hc, err = tlsfiles.Client(cfg.CertFile, cfg.KeyFile, cfg.CAFile, cfg.Timeout); err != nil {
			return nil, fmt.Errorf("sifen: %w", err)
		}
	}
	paths := map[string]string{
		RecepcionPath:    cmp.Or(cfg.RecepcionPath, RecepcionPath),
		ConsultaLotePath: cmp.Or(cfg.ConsultaLotePath, ConsultaLotePath),
		ConsultaPath:     cmp.Or(cfg.ConsultaPath, ConsultaPath),
	}
	return &Client{http: hc, cfg: cfg, paths: paths}, nil
}

// checkBaseURL accepts "" and an absolute http(s) URL with a host.
func checkBaseURL(base string) error {
	if base == "" {
		return nil
	}
	u, err := url.Parse(strings.ReplaceAll(base, "{env}", string(EnvTest)))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("sifen: client base URL %q is not an http(s) URL", base)
	}
	return nil
}

// url returns the endpoint of a service path in env, an overridden path
// going to the configured one.
func (c *Client) url(env Env, path string) string {
	path = cmp.Or(c.paths[path], path)
	base := c.cfg.TestURL
	if env == EnvProd {
		base = c.cfg.ProdURL
	}
	if c.cfg.BaseURL != "" {
		base = strings.ReplaceAll(c.cfg.BaseURL, "{env}", string(env))
	}
	return strings.TrimRight(base, "/") + path
}

// newRequestID returns a dId: 15 random digits, the first not zero.
func newRequestID() string {
	return fmt.Sprintf("%015d", rand.Int64N(9e14)+1e14)
}

// RecepcionLote sends a packed lot (siRecepLoteDE) and returns SIFEN's
// answer: 0300 with a lot number, CodeLotNotQueued with the reason, or the
// code and message of SIFEN's refusal of the request (rRetEnviDe, HTTP 200
// or 400, e.g. 0160): a definitive answer that nothing was queued. Errors:
// *RemoteError for another HTTP error or a SOAP fault; a transport error
// when no answer came (see notSent).
func (c *Client) RecepcionLote(ctx context.Context, env Env, zip []byte) (EnvioLoteResponse, error) {
	req := EnvioLote{ID: newRequestID(), XDE: base64.StdEncoding.EncodeToString(zip)}
	resp, err := call[EnvioLoteResponse](ctx, c, env, ServiceRecepcionLote, RecepcionPath, req)
	var refused *RemoteError
	if errors.As(err, &refused) && refused.Code != "" {
		return EnvioLoteResponse{ProcessedAt: refused.ProcessedAt, Code: refused.Code, Message: refused.Message}, nil
	}
	return resp, err
}

// ConsultaLote asks for the result of a lot (siResultLoteDE).
func (c *Client) ConsultaLote(ctx context.Context, env Env, lotNumber string) (ConsultaLoteResponse, error) {
	if err := validateLotNumber(lotNumber); err != nil {
		return ConsultaLoteResponse{}, err
	}
	req := ConsultaLote{ID: newRequestID(), LotNumber: lotNumber}
	return call[ConsultaLoteResponse](ctx, c, env, serviceConsultaLote, ConsultaLotePath, req)
}

// ConsultaDE asks whether SIFEN has a DE (siConsDE): 0422 or 0420.
func (c *Client) ConsultaDE(ctx context.Context, env Env, cdc string) (ConsultaDEResponse, error) {
	req := ConsultaDE{ID: newRequestID(), CDC: cdc}
	return call[ConsultaDEResponse](ctx, c, env, ServiceConsultaDE, ConsultaPath, req)
}

// call posts body in a SOAP envelope to the service at path in env and
// reads the answer.
func call[T any](ctx context.Context, c *Client, env Env, service, path string, body any) (T, error) {
	var zero T
	payload, err := MarshalSOAP(body)
	if err != nil {
		return zero, err
	}
	ans, err := c.post(ctx, env, service, path, SOAPContentType, payload)
	if err != nil {
		return zero, err
	}
	out, fault, err := UnmarshalSOAP[T](ans.Body)
	var refused *RemoteError
	switch {
	case fault != nil:
		return zero, &RemoteError{Service: service, StatusCode: ans.StatusCode, Fault: fault.String(), FaultCode: fault.Code}
	case errors.As(err, &refused):
		// rRetEnviDe, on HTTP 200 or 400 alike: SIFEN's own refusal.
		refused.Service, refused.StatusCode = service, ans.StatusCode
		return zero, refused
	case err != nil || ans.StatusCode != http.StatusOK:
		return zero, &RemoteError{Service: service, StatusCode: ans.StatusCode, Body: snippet(ans.Body)}
	}
	return *out, nil
}

func snippet(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// notSent reports whether err, from a Client call, proves SIFEN did not take
// the request: no connection was made, or SIFEN refused it unprocessed
// (refusedUnprocessed). Any other failure may have followed its receipt.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var cv *tls.CertificateVerificationError
	var re *RemoteError
	switch {
	case errors.As(err, &cv):
		return true
	case errors.As(err, &re):
		return refusedUnprocessed(re)
	}
	return false
}

// refusedUnprocessed reports whether an answer that is not a result proves
// SIFEN did not process the request (docs/decisions/0055): its refusal
// rRetEnviDe, a SOAP fault blaming the message (not env:Receiver), or,
// without a fault, a 4xx.
func refusedUnprocessed(re *RemoteError) bool {
	if re.Code != "" {
		return true
	}
	if re.Fault != "" {
		switch faultKind(re.FaultCode) {
		case "Sender", "VersionMismatch", "MustUnderstand", "DataEncodingUnknown": // SOAP 1.2 Part 1, §5.4.6
			return true
		case faultReceiver:
			return false
		}
	}
	return re.StatusCode >= 400 && re.StatusCode < 500
}
