// Command baldepostgres is an application that opens balde's engine on
// PostgreSQL through balde.Open: it imports the root package and registers
// the pgx driver alone, and must link no SQLite driver (drivers_test.go;
// the sizes in decision 0129 are of this program).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/balde-throttle/balde"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"
)

func main() {
	dsn := "postgres://balde@127.0.0.1:5432/balde"
	if len(os.Args) > 1 {
		dsn = os.Args[1]
	}
	eng, err := balde.Open(context.Background(), balde.Config{DB: dsn, Migrate: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	eng.Close(context.Background())
}
