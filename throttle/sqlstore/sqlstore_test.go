package sqlstore_test

import (
	"testing"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// TestStore runs the engine's whole behaviour suite on each SQL engine: the
// same results as the in-memory reference store.
func TestStore(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		throttletest.TestStore(t, func(t *testing.T, clock throttle.Clock) throttletest.FullStore {
			return sqlstoretest.MustOpen(t, engine, clock)
		})
	})
}

// TestGroupCommitStore runs the suite through a GroupCommit on each engine.
func TestGroupCommitStore(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		throttletest.TestStore(t, func(t *testing.T, clock throttle.Clock) throttletest.FullStore {
			s := sqlstoretest.MustOpen(t, engine, clock)
			g := throttle.NewGroupCommit(s, throttle.GroupCommitOptions{})
			t.Cleanup(func() { g.Close() })
			return throttletest.WithReads(g, s)
		})
	})
}
