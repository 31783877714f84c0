package report

import (
	"fmt"

	"github.com/balde-throttle/balde/throttle/sqlstore"
)

// SchemaState is what "balde migrate" prints: "sqlite version 3 of 5 (2
// pending)", "… (current)", or the dirty state with what to do about it.
func SchemaState(engine sqlstore.Engine, version, latest uint, dirty bool) string {
	state := "current"
	switch {
	case dirty:
		state = "dirty: the last migration failed half-way; make the schema match a version by hand, then balde migrate force VERSION"
	case version < latest:
		state = fmt.Sprintf("%d pending", latest-version)
	}
	return fmt.Sprintf("%s version %d of %d (%s)", engine, version, latest, state)
}
