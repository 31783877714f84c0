// Command dictsim runs the DICT simulator (package dict/dictsim): a real
// HTTP server speaking the DICT API's XML that enforces the DICT's limits
// server-side, so the app and its tests have a DICT without credentials.
//
//	dictsim --addr 127.0.0.1:8181 --entries dict/testdata/entries.csv --category H --fake-clock
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/internal/simkit"
)

func main() { simkit.Main("dictsim", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dictsim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8181", "address to listen on")
	var cfg dictsim.Config
	fs.StringVar(&cfg.EntriesFile, "entries", "", "CSV of the directory's entries (key,key_type,participant,branch,account,account_type,owner_type,owner_tax_id,owner_name)")
	fs.StringVar(&cfg.Category, "category", "A", "every participant's category, A..H")
	fs.DurationVar(&cfg.Latency, "latency", 0, "time between admitting a request and charging and answering it (requests in flight race as against the DICT)")
	fs.BoolVar(&cfg.NameEmptyBucket, "name-empty-bucket", false, "name the empty bucket's policy in a 429's problem (the public API does not)")
	fs.BoolVar(&cfg.FakeClock, "fake-clock", false, "time stands still until POST /sim/clock?advance=DURATION moves it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: dictsim [flags]\n\nFlags:")
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nExample:\n  dictsim --addr 127.0.0.1:8181 --entries dict/testdata/entries.csv --category H --fake-clock")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	srv, err := dictsim.NewServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Open(*addr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dictsim listening on %s (category %s, fake clock %t)\n", srv.URL(), cfg.Category, cfg.FakeClock)
	<-ctx.Done()
	return nil
}
