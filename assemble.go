package balde

import (
	"net/http"
	"time"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
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
	// AllowUnverified takes the answers of a DICT that is neither a
	// simulator nor on loopback without a Verifier: logged at Error and
	// exported as balde_dict_answers_unverified 1. Without it, Open refuses
	// such a DICT (docs/decisions/0181).
	AllowUnverified bool
}

// DictConfig converts to internal/dictsetup.Config: a field added to one is
// added to the other, in the same place.

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
