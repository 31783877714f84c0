// Command baldesqlite is an application that opens balde's engine on
// SQLite through balde.Open: it imports the root package and registers the
// SQLite driver alone, and must link no PostgreSQL driver (drivers_test.go;
// the sizes in decision 0129 are of this program).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/balde-throttle/balde"
	_ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

func main() {
	dsn := "sqlite://app.db"
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
