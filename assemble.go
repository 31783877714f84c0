package balde

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
)

// DictConfig is how Open builds the engine's DICT client (Engine.Dict),
// the throttled client of every DICT call balde makes, over the engine's
// limiter, catalog and lookup records.
type DictConfig struct {
	// BaseURL is the DICT's address (https://dict.pi.rsfn.net.br:16422),
	// PoliciesURL that of GET /policies/ when it has its own host ("":
	// BaseURL), Participant this participant's ISPB. BaseURL and
	// Participant are required.
	BaseURL, PoliciesURL, Participant string
	// HTTPClient is the application's own client (its TLS, signing proxy,
	// timeouts), wrapped by a dict.Transport. Nil: one with mutual TLS from
	// CertFile, KeyFile and CAFile when any is set, else a 30 s timeout.
	HTTPClient *http.Client
	// CertFile and KeyFile are the PEM client certificate and key, CAFile a
	// PEM bundle of the roots to trust; ignored with HTTPClient.
	CertFile, KeyFile, CAFile string
	// Signer signs write operations, Verifier checks the DICT's signed
	// answers (dict.ClientConfig).
	Signer   dict.Signer
	Verifier dict.Verifier
	// LearnCategory asks the DICT's GET /policies/ for the participant's
	// category at the start of Run (reusing one learned within
	// dict.CategoryFresh). Off, or until then, the one recorded earlier is
	// restored and nothing is sent.
	LearnCategory bool
	// Simulator says the DICT sees no traffic but this process's (serve's
	// dictsim): automatic reconciliation stays off against it.
	Simulator bool
}

// SifenConfig is how Open builds the engine's SIFEN sender (Engine.Sifen),
// the one send path of documents.
type SifenConfig struct {
	// Transport is the application's own SIFEN client (its signed SOAP
	// client implementing sifen.SOAPServices). Nil: a *sifen.Client for
	// BaseURL with CertFile, KeyFile and CAFile.
	Transport sifen.SOAPServices
	// BaseURL replaces SIFEN's official endpoints (sifen.TestURL,
	// sifen.ProdURL); "{env}" in it becomes test or prod (the simulator's
	// "http://127.0.0.1:8282/{env}"). "": the official endpoints.
	BaseURL string
	// CertFile and KeyFile are the PEM client certificate and key, CAFile a
	// PEM bundle of the roots to trust; ignored with Transport.
	CertFile, KeyFile, CAFile string
	// RemoteBlock and RemoteBlockMax shape the local block after a 0301
	// (sifen.SenderConfig; zero: sifen.DefaultRemoteBlock and
	// sifen.DefaultRemoteBlockMax).
	RemoteBlock, RemoteBlockMax time.Duration
	// AllowUnsigned lets DEs without a signature into the test environment
	// (never prod).
	AllowUnsigned bool
}

// dictHTTPClient is the HTTP client of cfg: cfg.HTTPClient, else one
// with mutual TLS from the certificate files when any is set, else nil
// (dict's default). It touches no database.
func dictHTTPClient(cfg DictConfig) (*http.Client, error) {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient, nil
	}
	if cfg.CertFile == "" && cfg.KeyFile == "" && cfg.CAFile == "" {
		return nil, nil
	}
	return dict.NewTLSClient(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
}

// newDictClient returns the DICT client of cfg, its catalog set to the
// category recorded in the database. Against a loopback address (a
// simulator) a payment credit also notifies the simulator (/sim/payments).
func (e *Engine) newDictClient(ctx context.Context, cfg DictConfig) (*dict.Client, error) {
	httpClient, _ := dictHTTPClient(cfg) // checked by checkDict
	cc := dict.ClientConfig{
		BaseURL: cfg.BaseURL, PoliciesURL: cfg.PoliciesURL, Participant: cfg.Participant,
		Limiter: e.limiter, Catalog: e.catalog, Records: e.records,
		HTTPClient: httpClient, Signer: cfg.Signer, Verifier: cfg.Verifier, Logger: e.logger.WithGroup("dict"),
	}
	if u, err := url.Parse(cfg.BaseURL); err == nil && isLoopbackHost(u.Hostname()) {
		cc.PaymentNoticeURL = strings.TrimSuffix(cfg.BaseURL, "/") + "/sim/payments"
	}
	client, err := dict.NewClient(cc)
	if err != nil {
		return nil, &ConfigError{"Dict", err}
	}
	if _, err := client.RestoreCategory(ctx); err != nil {
		return nil, err
	}
	return client, nil
}

// learnCategory sets the catalog's category from the DICT's GET /policies/
// (or the one learned within dict.CategoryFresh). A DICT that cannot be
// asked is logged; only a database that cannot answer is an error.
func (e *Engine) learnCategory(ctx context.Context, client *dict.Client) error {
	learned, err := client.LearnCategory(ctx, dict.CategoryFresh)
	switch {
	case err != nil && errors.Is(err, throttle.ErrStoreUnavailable):
		return err
	case err != nil:
		e.logger.Warn("dict: category not learned from the DICT: the strictest category applies until it is",
			slog.String("category", e.catalog.Category()), slog.Any("error", err))
	default:
		e.logger.Info("dict: category", slog.String("category", learned.Category), slog.String("source", learned.Source))
	}
	return nil
}

// warnUnverified logs at Error, and sets balde_dict_answers_unverified,
// when cfg takes the answers of a DICT that is not a simulator without a
// Verifier (decision 0181).
func (e *Engine) warnUnverified(cfg DictConfig) {
	u, err := url.Parse(cfg.BaseURL)
	unverified := cfg.Verifier == nil && !cfg.Simulator && err == nil && !isLoopbackHost(u.Hostname())
	if m := e.metrics(); m != nil {
		m.SetDictUnverified(unverified)
	}
	if unverified {
		e.logger.Error("dict: the DICT's answers are NOT verified: their XMLDSig signature is not checked (set BALDE_DICT_VERIFY_CERT, dict.XMLVerifier)",
			slog.String("dict", cfg.BaseURL), slog.String("metric", "balde_dict_answers_unverified 1"))
	}
}

// isLoopbackHost reports whether host is a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkDict finds what is wrong with cfg before any database is touched.
func checkDict(cfg *DictConfig) error {
	if cfg == nil {
		return nil
	}
	if err := dict.ValidateISPB(cfg.Participant); err != nil {
		return fmt.Errorf("participant: %w", err)
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	if _, err := dictHTTPClient(*cfg); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	return nil
}
