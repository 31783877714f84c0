// Command sqliteonly is an application on SQLite alone: it imports
// throttle/sqlstore and its SQLite driver, and must link no PostgreSQL
// driver (drivers_test.go; the sizes in decision 0093 are of this program).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

func main() {
	s, err := sqlitedriver.Open(context.Background(), "sqlite://app.db", sqlstore.Options{Migrate: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s.Close()
}
