// Package sifen sends electronic documents (DE) to SIFEN, Paraguay's
// e-invoicing system, without ever provoking its penalties.
//
// SIFEN answers 0301 ("lot not queued") and may block an issuer's RUC for 10
// to 60 minutes when a lot breaks its rules or a RUC sends too often. This
// package therefore checks everything it can before a lot leaves:
//
//   - every DE's issuer RUC (dRucEm) and check digit (dDVEmi), with SET's
//     module-11 algorithm (ruc.go);
//   - the lot rules: 1 to 50 DEs, one DE type, one issuer RUC, and the SOAP
//     message as sent at most 1000 KB (lote.go); that no unsigned or test DE
//     goes to prod;
//   - the interval between two lots of one RUC in one environment, counted
//     from the answer to the previous lot and shared by every process on
//     the database, with no lot while another of the RUC is on the wire, and
//     a local block after 0301 that grows with recurrence (sender.go,
//     policy.go; docs/decisions/0011, 0050, 0135);
//   - that no CDC is sent again without SIFEN's definitive answer, and that
//     no lot is sent twice, across processes sharing one database
//     (sender.go, resolve.go; docs/decisions/0012).
//
// Sender is the one send path: the web app's send buttons and the batch
// command both call Sender.Send on the same database. It depends on a
// DocumentStore (sifen/sifensql keeps it in SQL, so this package imports no
// database driver) and SOAPServices: Client, the bare SOAP transport, which
// does not throttle. The simulator in sifen/sifensim speaks the same
// protocol.
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

// ParseEnv returns the Env named s ("test" or "prod"); anything else is an
// error wrapping ErrInvalidEnv.
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
