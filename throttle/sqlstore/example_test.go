package sqlstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver"
)

// A store of its own in a SQLite file (migrated at Open), a limiter over
// it, and three takes of a policy of two per minute: the third is a
// refusal, a value with the exact wait, and the ledger holds every take.
// The engine's package opens the store (sqlitedriver here: the program
// links no PostgreSQL driver); pgxdriver.Open(ctx, "postgres://…", …)
// opens PostgreSQL the same way and links no SQLite.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "sqlstore-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))

	store, err := sqlitedriver.Open(ctx, "sqlite://"+filepath.Join(dir, "balde.db"), sqlstore.Options{
		Migrate: true, Clock: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	sms := throttle.PerMinute("SMS_PROVIDER", 2, 2)
	limiter, err := throttle.NewLimiter(store, throttle.Policies{sms.Name: sms}, throttle.Config{Clock: clock.Now})
	if err != nil {
		fmt.Println(err)
		return
	}
	key := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: "+5561988880000"}
	for range 3 {
		d, err := limiter.Take(ctx, "order-17", throttle.Charge{Key: key, Cost: 1})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("allowed=%t remaining=%d retry after %s\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(30 * time.Second)
	d, _ := limiter.Take(ctx, "order-17", throttle.Charge{Key: key, Cost: 1})
	fmt.Printf("30s later: allowed=%t\n", d.Allowed)
	// Output:
	// allowed=true remaining=1 retry after 0s
	// allowed=true remaining=0 retry after 0s
	// allowed=false remaining=0 retry after 30s
	// 30s later: allowed=true
}
