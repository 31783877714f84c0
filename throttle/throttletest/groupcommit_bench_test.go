package throttletest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// BenchmarkGroupCommitUpdate measures GroupCommit's own cost per
// operation over the in-memory store, callers with a cancellable context
// (a request's, a command's) on distinct keys.
func BenchmarkGroupCommitUpdate(b *testing.B) {
	g := throttle.NewGroupCommit(throttletest.NewMemStore(throttle.NewManualClock(throttletest.Epoch).Now), throttle.GroupCommitOptions{})
	b.Cleanup(func() { _ = g.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	var n atomic.Int64
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		key := throttle.Key{Policy: "P", Env: "test", Identifier: fmt.Sprint("k", n.Add(1))}
		for pb.Next() {
			if err := g.Update(ctx, []throttle.Key{key}, nil, func(*throttle.Tx) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
