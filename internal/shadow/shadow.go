// Package shadow keeps the policies in shadow mode (balde_policies.shadow),
// whose refusals are recorded and their requests admitted.
package shadow

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// Set is the policies in shadow mode as a process last loaded them, read by
// every limiter of the engine (throttle.Config.Shadow). The zero value holds
// none; it is safe for concurrent use.
type Set struct {
	set atomic.Pointer[map[string]bool]
}

// Has reports whether policy is in shadow mode.
func (s *Set) Has(policy string) bool {
	m := s.set.Load()
	return m != nil && (*m)[policy]
}

// List lists the policies in shadow mode, sorted.
func (s *Set) List() []string {
	if m := s.set.Load(); m != nil {
		return slices.Sorted(maps.Keys(*m))
	}
	return nil
}

// Load reads the policies in shadow mode from store's database.
func (s *Set) Load(ctx context.Context, store *sqlstore.Store) error {
	var names []string
	err := store.Retry(ctx, "load shadow policies", func() error {
		names = names[:0]
		return store.ReadDB().SelectContext(ctx, &names, `SELECT name FROM balde_policies WHERE shadow = 1`)
	})
	if err != nil {
		return fmt.Errorf("balde: policies in shadow mode: %w", err)
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	s.set.Store(&m)
	return nil
}

// Save turns policy's shadow mode on or off in store's database, then
// loads the set again.
func (s *Set) Save(ctx context.Context, store *sqlstore.Store, policy string, on bool) error {
	flag := 0
	if on {
		flag = 1
	}
	db := store.DB()
	err := store.Retry(ctx, "set shadow", func() error {
		_, err := db.ExecContext(ctx, db.Rebind(`INSERT INTO balde_policies (name, shadow) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET shadow = excluded.shadow`), policy, flag)
		return err
	})
	if err != nil {
		return fmt.Errorf("balde: shadow %s: %w", policy, err)
	}
	return s.Load(ctx, store)
}
