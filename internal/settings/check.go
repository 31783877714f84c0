package settings

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
)

// Error is a setting, or settings, that cannot be used together or
// loaded, naming the variables and flags; Format and Args are the English
// message internal/i18n translates, Err the cause, if any.
type Error struct {
	Format string
	Args   []any
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf(e.Format, e.Args...) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func errorf(format string, args ...any) *Error {
	e := &Error{Format: format, Args: args}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.Err = err
		}
	}
	return e
}

// CheckSifenBlock checks that SifenBlockMax is at least SifenBlockStep.
func (c Settings) CheckSifenBlock() error {
	if c.SifenBlockMax < c.SifenBlockStep {
		return errorf("BALDE_SIFEN_BLOCK_MAX (--sifen-block-max) %s is shorter than BALDE_SIFEN_BLOCK_STEP (--sifen-block-step) %s: the longest block is at least one step",
			c.SifenBlockMax, c.SifenBlockStep)
	}
	return nil
}

// CheckDictURLs refuses a DictURL or DictPoliciesURL that is not http(s)
// with a host, before any database is opened.
func (c Settings) CheckDictURLs() error {
	for _, u := range []struct{ setting, value string }{
		{"BALDE_DICT_URL (--dict-url)", c.DictURL},
		{"BALDE_DICT_POLICIES_URL (--dict-policies-url)", c.DictPoliciesURL},
	} {
		if u.value == "" {
			continue
		}
		if p, err := url.Parse(u.value); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return errorf("%s %q is not an http(s) URL with a host", u.setting, u.value)
		}
	}
	return nil
}

// SimulatorParticipant is the ISPB used against a simulator when
// DictParticipant is unset.
const SimulatorParticipant = "12345678"

// DictIsSimulator reports whether DictURL is unset or on loopback.
func (c Settings) DictIsSimulator() bool {
	if c.DictURL == "" {
		return true
	}
	u, err := url.Parse(c.DictURL)
	return err == nil && loopback(u.Hostname())
}

// Participant is this participant's ISPB: DictParticipant, else
// SimulatorParticipant against a simulator ("" otherwise).
func (c Settings) Participant() string {
	if c.DictParticipant == "" && c.DictIsSimulator() {
		return SimulatorParticipant
	}
	return c.DictParticipant
}

// DictPolicies is the base URL of GET /policies/: DictPoliciesURL, else
// DictURL against a simulator, else DictURL with its host renamed as the
// spec names it (dict.pi… → dict-ratelimit.pi…), or "" when it cannot be.
func (c Settings) DictPolicies() string {
	if c.DictPoliciesURL != "" || c.DictIsSimulator() {
		return c.DictPoliciesURL
	}
	u, err := url.Parse(c.DictURL)
	if err != nil {
		return ""
	}
	first, rest, _ := strings.Cut(u.Hostname(), ".")
	suffix, ok := strings.CutPrefix(first, "dict")
	if !ok || suffix != "" && suffix != "-h" || rest == "" {
		return ""
	}
	host := "dict-ratelimit" + suffix + "." + rest
	if port := u.Port(); port != "" {
		host = net.JoinHostPort(host, port)
	}
	u.Host = host
	return u.String()
}

// DictSigning returns the DICT client's Signer (DictSignCert and
// DictSignKey, or the TLS pair with DictSignWithTLSKey) and Verifier
// (DictVerifyCert), each nil when not configured; a bad pair is a *Error.
func (c Settings) DictSigning() (signer dict.Signer, verifier dict.Verifier, err error) {
	certFile, keyFile, vars := c.DictSignCert, c.DictSignKey, "BALDE_DICT_SIGN_CERT/BALDE_DICT_SIGN_KEY"
	withTLSKey := certFile == "" && keyFile == "" && c.DictSignWithTLSKey
	if withTLSKey {
		certFile, keyFile, vars = c.DictCert, c.DictKey, "BALDE_DICT_CERT/BALDE_DICT_KEY (--dict-sign-with-tls-key)"
	}
	switch {
	case certFile == "" && keyFile == "" && !withTLSKey:
	case certFile == "" || keyFile == "":
		return nil, nil, errorf("DICT signing (%s): give both the certificate and the key", vars)
	default:
		if signer, err = dict.LoadXMLSigner(certFile, keyFile); err != nil {
			return nil, nil, errorf("DICT signing (%s): %v", vars, err)
		}
	}
	if c.DictVerifyCert != "" {
		if verifier, err = dict.LoadXMLVerifier(c.DictVerifyCert); err != nil {
			return nil, nil, errorf("DICT answers (BALDE_DICT_VERIFY_CERT): %v", err)
		}
	}
	return signer, verifier, nil
}

// DictConfig is the DICT client's configuration for baseURL; a failing
// DictSigning (check it first) leaves out the signer and verifier.
func (c Settings) DictConfig(baseURL string) balde.DictConfig {
	signer, verifier, _ := c.DictSigning()
	return balde.DictConfig{BaseURL: baseURL, PoliciesURL: c.DictPolicies(), Participant: c.Participant(),
		CertFile: c.DictCert, KeyFile: c.DictKey, CAFile: c.DictCA, Signer: signer, Verifier: verifier, LearnCategory: true,
		AllowUnverified: c.DictUnverified}
}

// SifenConfig is the SIFEN sender's configuration over transport.
func (c Settings) SifenConfig(transport sifen.SOAPServices) balde.SifenConfig {
	return balde.SifenConfig{Transport: transport, RemoteBlock: c.SifenBlockStep, RemoteBlockMax: c.SifenBlockMax}
}
