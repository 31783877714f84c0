// Command postgresonly is an application on PostgreSQL alone: it imports
// throttle/sqlstore and its pgx driver, and must link no SQLite
// (drivers_test.go; the sizes in decision 0093 are of this program).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
)

func main() {
	s, err := pgxdriver.Open(context.Background(), os.Getenv("DATABASE_URL"), sqlstore.Options{Migrate: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s.Close()
}
