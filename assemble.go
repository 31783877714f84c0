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
	"github.com/balde-throttle/balde/sifen/sifensql"
	"github.com/balde-throttle/balde/throttle"
)

// DictConfig is how Open builds the engine's DICT client (Engine.Dict):
// the throttled client of every DICT call balde makes (lookups, payment
// credits, reconciliation), over the engine's limiter, catalog and lookup
// records.
type DictConfig struct {
	// BaseURL is the DICT's address, e.g. https://dict.pi.rsfn.net.br:16522.
	// Required.
	BaseURL string
	// PoliciesURL is the base URL of GET /policies/ when it lives on its own
	// host (dict-ratelimit… in the public spec); "" is BaseURL.
	PoliciesURL string
	// Participant is this participant's ISPB (8 digits). Required.
	Participant string
	// HTTPClient is the application's own client (its TLS, signing proxy,
	// timeouts); its Transport is wrapped by a dict.Transport. Nil: a
	// client with mutual TLS from CertFile, KeyFile and CAFile when any is
	// set (dict.NewTLSClient), else one with a 30 s timeout.
	HTTPClient *http.Client
	// CertFile and KeyFile are the PEM client certificate and key, CAFile a
	// PEM bundle of the roots to trust; ignored with HTTPClient.
	CertFile, KeyFile, CAFile string
	// Signer signs write operations (dict.ClientConfig.Signer).
	Signer dict.Signer
	// Verifier checks the DICT's signed answers (dict.ClientConfig.Verifier).
	Verifier dict.Verifier
	// LearnCategory asks the DICT's GET /policies/ for the participant's
	// category (reusing one learned within dict.CategoryFresh): at the
	// start of Run for Config.Dict, in NewDictClient for a client of its
	// own. Off, or until then, the one recorded earlier is restored and
	// nothing is sent.
	LearnCategory bool
	// Simulator says the DICT is a simulator that sees no traffic but this
	// process's (balde serve's in-process dictsim): automatic
	// reconciliation (Jobs.DictReconcileEvery 0) stays off against it.
	Simulator bool
}

// SifenConfig is how Open builds the engine's SIFEN sender (Engine.Sifen):
// the one send path of documents, with lot polling and resolution.
type SifenConfig struct {
	// Transport is the application's own SIFEN client (its signed SOAP
	// client implementing sifen.SOAPServices). Nil: a *sifen.Client for
	// BaseURL with CertFile, KeyFile and CAFile.
	Transport sifen.SOAPServices
	// BaseURL replaces SIFEN's official endpoints (sifen.TestURL,
	// sifen.ProdURL); "{env}" in it becomes test or prod (the simulator's
	// "http://127.0.0.1:8282/{env}"). "": the official endpoints.
	BaseURL string
	// CertFile and KeyFile are the PEM client certificate and key for
	// mutual TLS, CAFile a PEM bundle of the roots to trust; ignored with
	// Transport.
	CertFile, KeyFile, CAFile string
	// RemoteBlock and RemoteBlockMax shape the local block after a 0301
	// (sifen.SenderConfig; zero: sifen.DefaultRemoteBlock and
	// sifen.DefaultRemoteBlockMax).
	RemoteBlock, RemoteBlockMax time.Duration
	// AllowUnsigned lets DEs without a signature into the test environment
	// (never prod).
	AllowUnsigned bool
}

// NewSifenClient is the *sifen.Client of cfg's BaseURL and certificate
// files (cfg.Transport aside). It touches no database: a bad URL or
// certificate is found before anything is opened.
func NewSifenClient(cfg SifenConfig) (*sifen.Client, error) {
	return sifen.NewClient(sifen.ClientConfig{BaseURL: cfg.BaseURL, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, CAFile: cfg.CAFile})
}

// NewSifenSender returns a SIFEN sender over the engine's store and
// limiter, logging to the engine's logger. Open builds Engine.Sifen with
// it from Config.Sifen; a batch process builds one with its own options.
func (e *Engine) NewSifenSender(cfg SifenConfig) (*sifen.Sender, error) {
	transport := cfg.Transport
	if transport == nil {
		client, err := NewSifenClient(cfg)
		if err != nil {
			return nil, err
		}
		transport = client
	}
	sender, err := sifen.NewSender(sifensql.New(e.store), transport, e.limiter, sifen.SenderConfig{
		Clock: e.store.Now, Logger: e.logger.WithGroup("sifen"), Resolver: e.resolver,
		RemoteBlock: cfg.RemoteBlock, RemoteBlockMax: cfg.RemoteBlockMax,
		AllowUnsigned: cfg.AllowUnsigned,
	})
	if err != nil {
		return nil, fmt.Errorf("balde: SIFEN sender: %w", err)
	}
	return sender, nil
}

// NewDictHTTPClient is the HTTP client of cfg: cfg.HTTPClient, else one
// with mutual TLS from the certificate files when any is set, else nil
// (dict's default). It touches no database.
func NewDictHTTPClient(cfg DictConfig) (*http.Client, error) {
	if cfg.HTTPClient != nil {
		return cfg.HTTPClient, nil
	}
	if cfg.CertFile == "" && cfg.KeyFile == "" && cfg.CAFile == "" {
		return nil, nil
	}
	return dict.NewTLSClient(cfg.CertFile, cfg.KeyFile, cfg.CAFile)
}

// NewDictClient returns a DICT client over the engine's limiter, catalog
// and lookup records, logging to the engine's logger, its catalog set to
// the participant's category: learned from the DICT's GET /policies/ when
// cfg.LearnCategory (a DICT that cannot be asked leaves the strictest, or
// Config.DictCategory, and is logged), else restored from the database.
// Open builds Engine.Dict with LearnCategory off and Run learns it.
// Against a loopback address (a simulator) a payment credit also notifies
// the simulator (/sim/payments). Open builds Engine.Dict with it from
// Config.Dict. Errors: a *ConfigError for a bad setting,
// throttle.ErrStoreUnavailable.
func (e *Engine) NewDictClient(ctx context.Context, cfg DictConfig) (*dict.Client, error) {
	if err := dict.ValidateISPB(cfg.Participant); err != nil {
		return nil, &ConfigError{"Dict", fmt.Errorf("participant: %w", err)}
	}
	httpClient, err := NewDictHTTPClient(cfg)
	if err != nil {
		return nil, &ConfigError{"Dict", fmt.Errorf("TLS: %w", err)}
	}
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
	if !cfg.LearnCategory {
		if _, err := client.RestoreCategory(ctx); err != nil {
			return nil, err
		}
		return client, nil
	}
	if err := e.learnCategory(ctx, client); err != nil {
		return nil, err
	}
	return client, nil
}

// learnCategory sets the catalog's category from the DICT's GET /policies/
// (or the one learned within dict.CategoryFresh). A DICT that cannot be
// asked is logged and leaves the category as it is; only a database that
// cannot answer is an error (throttle.ErrStoreUnavailable).
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

// isLoopbackHost reports whether host is a loopback address, where the
// simulators listen.
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
	if _, err := NewDictHTTPClient(*cfg); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	return nil
}
