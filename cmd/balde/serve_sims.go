package main

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"

	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/sifen/sifensim"
)

// simEntries are the DICT simulator's keys: a copy of
// dict/testdata/entries.csv (a test keeps the two equal), embedded so that
// serve has them wherever it runs.
//
//go:embed sim_entries.csv
var simEntries []byte

// simulators are the DICT and SIFEN simulators serve runs in-process when
// no endpoint is configured, so that "make run" works with no credentials.
// Each listens on a loopback port of its own; a nil field is a simulator
// not started (its real endpoint is configured).
type simulators struct {
	dict    *dictsim.Server
	entries int
	sifen   *sifensim.Server
}

// startSimulators starts the simulators cfg leaves without an endpoint:
// dictsim when DictURL is empty (with its own in-memory buckets, never
// the app's database, the sample entries and the configured category, else
// A: it is the demo's DICT, whose limits balde mirrors), sifensim when SifenURL
// is empty (SIFEN's rules with their defaults). It returns the URLs to use.
func startSimulators(ctx context.Context, cfg Config, logger *slog.Logger) (_ *simulators, dictURL, sifenURL string, err error) {
	sims := &simulators{}
	dictURL, sifenURL = cfg.DictURL, cfg.SifenURL
	defer func() {
		if err != nil {
			sims.close()
		}
	}()
	if dictURL == "" {
		entries, err := dictsim.ReadEntries(bytes.NewReader(simEntries))
		if err != nil {
			return nil, "", "", fmt.Errorf("serve: DICT simulator: %w", err)
		}
		sims.entries = len(entries)
		// The simulator is the DICT of the demo: its category is the one
		// configured, else A; balde learns it from GET /policies/ at start.
		category := cfg.DictCategory
		if category == "" {
			category = "A"
		}
		sims.dict, err = dictsim.NewServer(ctx, dictsim.Config{
			Entries:  entries,
			Category: category,
			Logger:   logger.WithGroup("dictsim"),
		})
		if err != nil {
			return nil, "", "", fmt.Errorf("serve: DICT simulator: %w", err)
		}
		if err := sims.dict.Open(cfg.DictSimAddr); err != nil {
			return nil, "", "", fmt.Errorf("serve: DICT simulator: %w", err)
		}
		dictURL = sims.dict.URL()
	}
	if sifenURL == "" {
		sims.sifen, err = sifensim.NewServer(sifensim.Config{Logger: logger.WithGroup("sifensim")})
		if err != nil {
			return nil, "", "", fmt.Errorf("serve: SIFEN simulator: %w", err)
		}
		if err := sims.sifen.Open(cfg.SifenSimAddr); err != nil {
			return nil, "", "", fmt.Errorf("serve: SIFEN simulator: %w", err)
		}
		sifenURL = sims.sifen.URL() + "/{env}"
	}
	return sims, dictURL, sifenURL, nil
}

// close stops the simulators that run (the DICT's temporary store goes
// with it).
func (s *simulators) close() error {
	if s == nil {
		return nil
	}
	var errs []error
	if s.sifen != nil {
		errs = append(errs, s.sifen.Close())
	}
	if s.dict != nil {
		errs = append(errs, s.dict.Close())
	}
	return errors.Join(errs...)
}
