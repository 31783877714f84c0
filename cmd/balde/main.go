// Command balde is the throttle's binary: the web app (serve), the batch
// senders (sifen-send, dict-lookup) and the operator commands (buckets,
// prune, migrate, dict-reconcile). Run "balde help" for the list.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first Ctrl-C asks the command to stop cleanly (a batch finishes
	// its current item); once it has, signals get their default action
	// again, so a second Ctrl-C kills the process.
	go func() {
		<-ctx.Done()
		stop()
	}()
	m := NewMain(os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	os.Exit(m.Run(ctx, os.Args[1:]))
}
