// Package dictsetup checks balde.DictConfig before Open touches a
// database, and builds the engine's DICT client from it.
package dictsetup

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/balde-throttle/balde/dict"
)

// Config has the fields of balde.DictConfig, documented there, in its
// order: each converts to the other.
type Config struct {
	BaseURL, PoliciesURL, Participant string
	HTTPClient                        *http.Client
	CertFile, KeyFile, CAFile         string
	Signer                            dict.Signer
	Verifier                          dict.Verifier
	LearnCategory, Simulator          bool
	AllowUnverified                   bool
}

// Check finds what is wrong with c: the participant, the base URL, the
// certificate files, a DICT whose answers would go unverified.
func (c Config) Check() error {
	if err := dict.ValidateISPB(c.Participant); err != nil {
		return fmt.Errorf("participant: %w", err)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an http(s) URL", c.BaseURL)
	}
	if _, err := c.HTTP(); err != nil {
		return fmt.Errorf("TLS: %w", err)
	}
	if c.Unverified() && !c.AllowUnverified {
		return fmt.Errorf("the signed answers of the DICT at %s would go unverified: set Verifier (dict.LoadXMLVerifier with the DICT's signing certificate), or AllowUnverified to accept that", c.BaseURL)
	}
	return nil
}

// HTTP is c.HTTPClient, else one with mutual TLS from the certificate
// files when any is set, else nil (dict's default).
func (c Config) HTTP() (*http.Client, error) {
	if c.HTTPClient != nil || c.CertFile+c.KeyFile+c.CAFile == "" {
		return c.HTTPClient, nil
	}
	return dict.NewTLSClient(c.CertFile, c.KeyFile, c.CAFile)
}

// NewClient returns the DICT client of c (checked) over cc's Limiter,
// Catalog, Records and Logger. Against a loopback address (a simulator) a
// payment credit also notifies the simulator (/sim/payments).
func (c Config) NewClient(cc dict.ClientConfig) (*dict.Client, error) {
	cc.BaseURL, cc.PoliciesURL, cc.Participant = c.BaseURL, c.PoliciesURL, c.Participant
	cc.HTTPClient, _ = c.HTTP()
	cc.Signer, cc.Verifier = c.Signer, c.Verifier
	if dict.IsLoopbackURL(c.BaseURL) {
		cc.PaymentNoticeURL = strings.TrimSuffix(c.BaseURL, "/") + "/sim/payments"
	}
	return dict.NewClient(cc)
}

// Unverified reports whether c takes the answers of a DICT that is not a
// simulator without a Verifier (docs/decisions/0181).
func (c Config) Unverified() bool {
	return c.Verifier == nil && !c.Simulator && !dict.IsLoopbackURL(c.BaseURL)
}
