// Package sifen sends electronic documents (DE) to SIFEN, Paraguay's
// e-invoicing system, without provoking its penalties: SIFEN answers 0301
// ("lot not queued") and may block an issuer's RUC for 10 to 60 minutes
// when a lot breaks its rules or a RUC sends too often. So before a lot
// leaves this package checks:
//
//   - each DE's issuer RUC and check digit, with SET's module-11 (ruc.go);
//   - the lot rules: 1 to 50 DEs, one type, one issuer, the SOAP message at
//     most 1000 KB (lote.go); no unsigned or test DE to prod;
//   - the interval between two lots of a RUC in one environment, from the
//     previous lot's answer, shared by every process on the database, with
//     no lot while another of the RUC is on the wire, and a local block
//     after 0301 growing with recurrence (sender.go, policy.go;
//     docs/decisions/0011, 0050, 0135);
//   - that no CDC is sent again without SIFEN's definitive answer, and no
//     lot twice, across processes (sender.go, resolve.go; docs/decisions/0012).
//
// Sender is the one send path, for the web app and the batch command alike.
// It depends on a DocumentStore (sifen/sifensql keeps it in SQL: this
// package imports no database driver) and SOAPServices (Client, the bare
// SOAP transport). sifen/sifensim simulates SIFEN.
package sifen

import (
	"fmt"
	"time"
)

// Namespace is the XML namespace of SIFEN's documents and messages.
const Namespace = "http://ekuatia.set.gov.py/sifen/xsd"

// Env is a SIFEN environment. There are exactly two.
type Env string

const (
	EnvTest Env = "test"
	EnvProd Env = "prod"
)

// ParseEnv returns the Env named s; anything else wraps ErrInvalidEnv.
func ParseEnv(s string) (Env, error) {
	e := Env(s)
	if err := e.Validate(); err != nil {
		return "", err
	}
	return e, nil
}

// Validate reports whether e is "test" or "prod" (error wraps ErrInvalidEnv).
func (e Env) Validate() error {
	switch e {
	case EnvTest, EnvProd:
		return nil
	}
	return fmt.Errorf("%w: %q (want test or prod)", ErrInvalidEnv, string(e))
}

// orDefault sets *d to def when it is not positive.
func orDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}
