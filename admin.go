package balde

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// ErrNoDatabase is CheckDatabase's error for a SQLite file that does not
// exist.
var ErrNoDatabase = errors.New("no database")

// CheckDatabase says whether dsn names a database that exists, for a tool
// that reads or fixes state (balde buckets, prune) and must not create
// and migrate an empty SQLite file in the wrong directory only to report
// that nothing matches: a SQLite file that does not exist wraps
// ErrNoDatabase (the message names the file); a DSN sqlstore.ParseDSN
// refuses is its error. A PostgreSQL database is created by its owner and
// is not checked here; nor is an in-memory SQLite database.
func CheckDatabase(dsn string) error {
	if _, _, err := sqlstore.ParseDSN(dsn); err != nil {
		return err
	}
	path, ok := SQLiteFile(dsn)
	if !ok {
		return nil
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w at %s", ErrNoDatabase, path)
	}
	return nil
}

// RestoreDictCategory sets the DICT catalog's participant category to the
// one the DICT last reported for participant (recorded by a
// reconciliation or a client that learns it), so that a tool that does
// not ask the DICT itself grades and shows the categorised buckets as
// serve does. With none recorded the catalog is unchanged (its configured
// category, else the strictest).
func (e *Engine) RestoreDictCategory(ctx context.Context, participant string) error {
	category, _, ok, err := e.records.LearnedCategory(ctx, e.catalog.Env(), participant)
	if err != nil || !ok {
		return err
	}
	return e.catalog.SetCategory(category)
}

// AdminPolicyNames are the names of every policy whose buckets an
// operator may see in this engine's database, sorted: the engine's
// (PolicyNames) and the inbound limiter's (web.InboundPolicyNames), whose
// buckets serve and the gateways write even when this engine has no
// inbound limiter.
func (e *Engine) AdminPolicyNames() []string {
	names := e.PolicyNames()
	for _, n := range web.InboundPolicyNames() {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}
