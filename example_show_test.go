package balde_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// One bucket as "balde buckets show" has it: the key read as an operator
// types it, the database refused when missing (not created), the DICT category the DICT
// last reported, and the bucket with its ledger rows in the JSON of
// /api/buckets and in people's words.
func Example_bucketsShow() {
	dir, _ := os.MkdirTemp("", "balde-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	dsn := "sqlite://" + filepath.Join(dir, "balde.db")
	_, err := balde.Open(ctx, balde.Config{DB: dsn}) // without Migrate nothing is created
	fmt.Println(err != nil)
	clock := throttle.NewManualClock(time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC))
	sms := throttle.PerMinute("SMS_PROVIDER", 10, 10)
	eng, err := balde.Open(ctx, balde.Config{DB: dsn, Migrate: true, Clock: clock.Now, Resolvers: throttle.Resolvers{throttle.Policies{sms.Name: sms}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer eng.Close(ctx)
	key, _ := inspect.ParseKey("SMS_PROVIDER/prod/acct-7")
	_, _ = eng.Limiter().Take(ctx, "sms 1", throttle.Charge{Key: key, Cost: 9})
	clock.Advance(7 * time.Second)

	err = eng.RestoreDictCategory(ctx, "12345678") // none recorded: unchanged
	st, _ := eng.Limiter().State(ctx, key)
	rows, _ := eng.Reader().Ledger(ctx, inspect.LedgerQuery{Key: &key, Limit: 20})
	out, _ := json.Marshal(view.NewAPIBucketDetail(st, rows, nil).Ledger)
	v := view.ViewBucket(i18n.New(i18n.English, time.UTC), st, nil)
	fmt.Println(err, string(out))
	fmt.Println(v.Severity, v.LastSend)
	// Output:
	// true
	// <nil> [{"id":1,"at":"2026-03-02T12:00:00Z","reason":"take","delta":-9,"balance":1,"count":1,"ref":"sms 1"}]
	// High 2026-03-02 12:00:00 UTC (7s ago)
}
