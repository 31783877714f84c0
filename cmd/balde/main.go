// Command balde is the throttle's binary: the web app (serve), the batch
// senders (sifen-send, dict-lookup) and the operator commands (buckets,
// prune, migrate, dict-reconcile). Run "balde help" for the list.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	_ "github.com/balde-throttle/balde/throttle/sqlstore/pgxdriver"    // balde takes either engine from --db
	_ "github.com/balde-throttle/balde/throttle/sqlstore/sqlitedriver" // (docs/decisions/0129)
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

// stopGrace is how long balde has to stop by itself after SIGTERM or
// Ctrl-C before it exits anyway, whatever a command waits on (a database
// lock held by a stopped process, a remote that does not answer). An exit
// cut short leaves what a kill leaves, which the crash tests cover: a
// claim the next run settles, a hold refunded later.
const stopGrace = 4 * time.Second

func main() {
	ctx, stop := signalContext()
	defer stop()
	m := NewMain(os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	os.Exit(m.Run(ctx, os.Args[1:]))
}

// signalContext is the context of a command: it ends at the first Ctrl-C
// or SIGTERM, which asks the command to stop cleanly (a batch finishes its
// current item); once it has, signals get their default action again, so
// a second Ctrl-C kills the process. Past stopGrace it exits by itself.
func signalContext() (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
		time.Sleep(stopGrace)
		fmt.Fprintf(os.Stderr, "balde: not stopped %s after the signal (waiting on the database or a remote?): exiting now\n", stopGrace)
		os.Exit(ExitFailed)
	}()
	return ctx, stop
}
