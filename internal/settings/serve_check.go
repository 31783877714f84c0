package settings

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// MinRetention is the shortest ledger retention the background prune
// (and balde prune without --force) accepts: the ledger is the audit trail
// of every token, and a retention of seconds would erase it.
const MinRetention = 24 * time.Hour

// SifenOfficial is the SifenURL (BALDE_SIFEN_URL) that selects SIFEN's
// official endpoints (sifen-test.set.gov.py and sifen.set.gov.py).
const SifenOfficial = "official"

// CheckServe is what no single parser can say about the settings of a
// long-running server: a background prune (PruneEvery) with a retention
// under MinRetention without LedgerRetentionForce, or an
// AdminPasswordBcrypt that is not a bcrypt hash. Each is a *Error.
func (s Settings) CheckServe() error {
	if s.PruneEvery > 0 && s.LedgerRetention < MinRetention && !s.LedgerRetentionForce {
		return errorf("serve: BALDE_LEDGER_RETENTION %s would erase the audit trail of the last day; use at least %s, or set BALDE_LEDGER_RETENTION_FORCE=on", s.LedgerRetention, MinRetention)
	}
	if s.AdminPasswordBcrypt != "" {
		if _, err := bcrypt.Cost([]byte(s.AdminPasswordBcrypt)); err != nil {
			return errorf("BALDE_ADMIN_PASSWORD_BCRYPT: not a bcrypt hash: %v", err)
		}
	}
	return nil
}

// SifenClient returns the SIFEN client of the settings' certificates for
// baseURL: SifenOfficial for SIFEN's own endpoints, or a base URL in
// which "{env}" becomes test or prod (a simulator's). It touches no
// database, so a tool builds it before opening the engine: a bad URL or
// certificate changes nothing.
func (s Settings) SifenClient(baseURL string) (*sifen.Client, error) {
	if baseURL == SifenOfficial {
		baseURL = ""
	}
	return sifen.NewClient(sifen.ClientConfig{BaseURL: baseURL, CertFile: s.SifenCert, KeyFile: s.SifenKey, CAFile: s.SifenCA})
}

// ErrNoDatabase is the error of CheckCreate and CheckDatabase for a SQLite
// file that does not exist where a database is expected (the message
// names the file).
var ErrNoDatabase = errors.New("no database")

// CheckDatabase says whether dsn names a database that exists, for a tool
// that reads or fixes state (balde buckets, prune) and must not create
// and migrate an empty SQLite file in the wrong directory only to report
// that nothing matches: a SQLite file that does not exist wraps
// ErrNoDatabase; a DSN sqlstore.ParseDSN refuses is its error. A
// PostgreSQL database is created by its owner and is not checked here; nor
// is an in-memory SQLite database.
func CheckDatabase(dsn string) error {
	if _, _, err := sqlstore.ParseDSN(dsn); err != nil {
		return err
	}
	_, err := checkFile(dsn, false)
	return err
}

// CheckCreate says whether a server may open dsn: a missing SQLite file at
// a configured path usually means the database was deleted or moved, and
// creating an empty one in its place would silently reset every bucket and
// the ledger, so it is an error wrapping ErrNoDatabase (naming the file)
// unless create, or the path is the default (defaultDSN, a first
// run). creating says that a new database will be made, for the caller to
// say so loudly once open. PostgreSQL databases are never created by
// balde, nor checked; a DSN that does not parse is left to Open.
func CheckCreate(dsn string, create bool) (creating bool, err error) {
	return checkFile(dsn, create || dsn == defaultDSN)
}

// checkFile says whether the SQLite file of dsn is missing (creating, when
// create) or an error wrapping ErrNoDatabase; nothing for another DSN.
func checkFile(dsn string, create bool) (creating bool, err error) {
	path, ok := SQLiteFile(dsn)
	if !ok {
		return false, nil
	}
	_, err = os.Stat(path)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("database %s: %w", path, err)
	case create:
		return true, nil
	}
	return false, fmt.Errorf("%w at %s", ErrNoDatabase, path)
}

// CheckListenAddr reports whether addr is a HOST:PORT a listener can take:
// a port number in 0..65535 (0: any free port).
func CheckListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT: %w", err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n > 65535 {
		return fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return nil
}

// CheckDictClient says what is wrong with the settings a DICT that is not a
// simulator needs (CheckDictLive), the DICT participant (an ISPB of 8
// digits), the client certificates (dict.NewTLSClient) or the signing
// keys (DictSigning), before a DICT client is built; each is a *Error.
func (s Settings) CheckDictClient() error {
	if err := s.CheckDictLive(); err != nil {
		return err
	}
	if err := dict.ValidateISPB(s.Participant()); err != nil {
		return errorf("BALDE_DICT_PARTICIPANT (--dict-participant): %v", err)
	}
	if s.DictCert != "" || s.DictKey != "" || s.DictCA != "" {
		if _, err := dict.NewTLSClient(s.DictCert, s.DictKey, s.DictCA); err != nil {
			return errorf("DICT TLS: %v", err)
		}
	}
	_, _, err := s.DictSigning()
	return err
}
