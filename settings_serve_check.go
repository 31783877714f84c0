package balde

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
// AdminPasswordBcrypt that is not a bcrypt hash. Each is a *SettingError.
func (s Settings) CheckServe() error {
	if s.PruneEvery > 0 && s.LedgerRetention < MinRetention && !s.LedgerRetentionForce {
		return settingError("serve: BALDE_LEDGER_RETENTION %s would erase the audit trail of the last day; use at least %s, or set BALDE_LEDGER_RETENTION_FORCE=on", s.LedgerRetention, MinRetention)
	}
	if s.AdminPasswordBcrypt != "" {
		if _, err := bcrypt.Cost([]byte(s.AdminPasswordBcrypt)); err != nil {
			return settingError("BALDE_ADMIN_PASSWORD_BCRYPT: not a bcrypt hash: %v", err)
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
	return NewSifenClient(SifenConfig{BaseURL: baseURL, CertFile: s.SifenCert, KeyFile: s.SifenKey, CAFile: s.SifenCA})
}

// ErrWouldCreate is CheckCreate's error for a SQLite file missing at a
// configured path.
var ErrWouldCreate = errors.New("no database")

// CheckCreate says whether a server may open dsn: a missing SQLite file at
// a configured path usually means the database was deleted or moved, and
// creating an empty one in its place would silently reset every bucket and
// the ledger, so it is an error wrapping ErrWouldCreate (naming the file)
// unless create, or the path is the default (sqlstore.DefaultDSN, a first
// run). creating says that a new database will be made, for the caller to
// say so loudly once open. PostgreSQL databases are never created by
// balde, nor checked; a DSN that does not parse is left to Open.
func CheckCreate(dsn string, create bool) (creating bool, err error) {
	engine, driverDSN, err := sqlstore.ParseDSN(dsn)
	if err != nil || engine != sqlstore.SQLite {
		return false, nil
	}
	path := sqlstore.SQLitePath(driverDSN)
	_, err = os.Stat(path)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("database %s: %w", path, err)
	case create || dsn == sqlstore.DefaultDSN:
		return true, nil
	}
	return false, fmt.Errorf("%w at %s", ErrWouldCreate, path)
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

// CheckDictClient says what is wrong with the DICT participant (an ISPB of
// 8 digits), the client certificates (NewDictHTTPClient) or the signing
// keys (DictSigning), before a DICT client is built; each is a
// *SettingError.
func (s Settings) CheckDictClient() error {
	if err := dict.ValidateISPB(s.DictParticipant); err != nil {
		return settingError("--dict-participant: %v", err)
	}
	if _, err := NewDictHTTPClient(s.DictConfig("")); err != nil {
		return settingError("DICT TLS: %v", err)
	}
	_, _, err := s.DictSigning()
	return err
}
