// Command sifensim runs the SIFEN simulator (package balde/sifen/sifensim)
// on a loopback address:
//
//	sifensim --addr 127.0.0.1:8282 [--interval 10s] [--block 10m] [--processing 2s] [--fake-clock]
//
// Point balde at it with BALDE_SIFEN_URL=http://127.0.0.1:8282/{env}.
// GET /sim/stats shows the requests it got; with --fake-clock,
// POST /sim/clock?advance=10m moves its time.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/balde-throttle/balde/internal/simkit"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/throttle"
)

func main() { simkit.Main("sifensim", run) }

// run parses args, serves until ctx is done, and prints the address it
// listens on (a line "listening on http://ADDR") to stdout.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sifensim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8282", "address to listen on (loopback only; port 0 picks a free one)")
	cfg := sifensim.Config{Logger: slog.New(slog.NewTextHandler(stderr, nil))}
	fs.DurationVar(&cfg.Interval, "interval", sifensim.DefaultInterval, "least time between two lots of one RUC in one environment")
	fs.DurationVar(&cfg.Block, "block", sifensim.DefaultBlock, "how long a RUC that breaks a rule is blocked")
	fs.DurationVar(&cfg.Processing, "processing", sifensim.DefaultProcessing, "how long a lot stays in processing")
	fs.DurationVar(&cfg.BlockMax, "block-max", sifensim.DefaultBlockMax, "the longest block (each recurrence within 24 h blocks --block longer)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "how long siRecepLoteDE takes to answer (wall time), as over the internet")
	fake := fs.Bool("fake-clock", false, "use a clock that moves only with POST /sim/clock?advance=DURATION")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *fake {
		clock := throttle.NewManualClock(time.Now())
		cfg.Clock, cfg.Advance = clock.Now, clock.Advance
	}
	sim, err := sifensim.NewServer(cfg)
	if err != nil {
		return err
	}
	if err := sim.Open(*addr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", sim.URL())
	<-ctx.Done()
	return sim.Close()
}
