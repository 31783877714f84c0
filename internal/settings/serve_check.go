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

// MinRetention is the shortest ledger retention a prune accepts without
// --force: the ledger is the audit trail of every token.
const MinRetention = 24 * time.Hour

// SifenOfficial is the SifenURL of SIFEN's official endpoints.
const SifenOfficial = "official"

// CheckServe refuses, as a *Error, a background prune with a retention
// under MinRetention without LedgerRetentionForce, or a bad bcrypt hash.
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

// SifenClient returns the SIFEN client for baseURL (SifenOfficial, or one
// in which "{env}" becomes test or prod); it touches no database.
func (s Settings) SifenClient(baseURL string) (*sifen.Client, error) {
	if baseURL == SifenOfficial {
		baseURL = ""
	}
	return sifen.NewClient(sifen.ClientConfig{BaseURL: baseURL, CertFile: s.SifenCert, KeyFile: s.SifenKey, CAFile: s.SifenCA})
}

// ErrNoDatabase is CheckCreate's and CheckDatabase's error for a missing
// SQLite file.
var ErrNoDatabase = errors.New("no database")

// CheckDatabase says whether dsn's SQLite file exists (ErrNoDatabase), for
// a tool that must not create one only to find nothing; another database
// is not checked.
func CheckDatabase(dsn string) error {
	if _, _, err := sqlstore.ParseDSN(dsn); err != nil {
		return err
	}
	_, err := checkFile(dsn, false)
	return err
}

// CheckCreate says whether a server may open dsn: a missing SQLite file
// (deleted or moved: an empty one would reset every bucket) wraps
// ErrNoDatabase unless create or dsn is the default; creating says a new
// one will be made.
func CheckCreate(dsn string, create bool) (creating bool, err error) {
	return checkFile(dsn, create || dsn == defaultDSN)
}

// checkFile is CheckCreate without the default.
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

// CheckListenAddr reports whether addr is a HOST:PORT, port in 0..65535.
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

// CheckDictClient checks, before a DICT client is built, what a real DICT
// needs and the settings lack (docs/decisions/0181: the ISPB, the policies
// host, the verifying certificate or DictUnverified), then the ISPB, the
// TLS files and DictSigning; each failure is a *Error.
func (s Settings) CheckDictClient() error {
	switch live := !s.DictIsSimulator(); {
	case live && s.DictParticipant == "":
		return errorf("BALDE_DICT_PARTICIPANT (--dict-participant) is not set: this participant's ISPB (8 digits) is required against the DICT at %s", s.DictURL)
	case live && s.DictPolicies() == "":
		return errorf("BALDE_DICT_POLICIES_URL (--dict-policies-url) is not set: GET /policies/ has its own host, and %s is not a dict… host it can be derived from", s.DictURL)
	case live && s.DictVerifyCert == "" && !s.DictUnverified:
		return errorf("BALDE_DICT_VERIFY_CERT is not set: the DICT's signed answers would go unverified; set it to the DICT's signing certificate (or its CA), or acknowledge with --dict-unverified (BALDE_DICT_UNVERIFIED=on)")
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
