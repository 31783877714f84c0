// Package devsims runs the DICT and SIFEN simulators (dict/dictsim,
// sifen/sifensim) in-process for a development or demo setup with no
// credentials: "balde serve" starts them when no endpoint is configured.
// It is a package of its own so that an application embedding balde links
// the simulators only when it asks for them.
//
// Like the simulators, it imports nothing of dict, sifen or throttle.
package devsims

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

// sampleEntries are the DICT simulator's keys: a copy of
// dict/testdata/entries.csv (a test keeps the two equal), embedded so that
// the simulator has them wherever it runs.
//
//go:embed entries.csv
var sampleEntries []byte

// Config says which simulators to start and where.
type Config struct {
	// DictURL and SifenURL are the configured endpoints: a simulator starts
	// only for the one left empty, and a configured one is returned as it is.
	DictURL, SifenURL string
	// DictCategory is the DICT simulator's participant category (A to H);
	// empty is A. It is the demo's DICT, whose limits balde mirrors.
	DictCategory string
	// DictAddr and SifenAddr are the simulators' listen addresses
	// (HOST:PORT); empty is DefaultAddr.
	DictAddr, SifenAddr string
	// Logger receives the simulators' logs (groups "dictsim" and
	// "sifensim"); nil discards them.
	Logger *slog.Logger
}

// DefaultAddr is where a simulator listens by default: a free loopback
// port, a new one each start.
const DefaultAddr = "127.0.0.1:0"

// Simulators are the simulators Start started, and the endpoints to use.
// A nil server is a simulator not started (its endpoint is configured).
type Simulators struct {
	Dict *dictsim.Server
	// Entries is the number of sample keys the DICT simulator holds.
	Entries int
	Sifen   *sifensim.Server

	// DictURL is the DICT's base URL: the configured one or the simulator's.
	DictURL string
	// SifenURL is SIFEN's base URL, the configured one or the simulator's
	// with "{env}" for the environment (test or prod).
	SifenURL string
}

// Start starts the simulators cfg leaves without an endpoint: dictsim when
// DictURL is empty (its own in-memory buckets, never the application's
// database, with the sample entries and DictCategory), sifensim when
// SifenURL is empty (SIFEN's rules with their defaults). Each listens when
// Start returns. On an error nothing is left running. The DICT simulator
// runs until Close, not until ctx ends.
func Start(ctx context.Context, cfg Config) (_ *Simulators, err error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	for _, addr := range []*string{&cfg.DictAddr, &cfg.SifenAddr} {
		if *addr == "" {
			*addr = DefaultAddr
		}
	}
	s := &Simulators{DictURL: cfg.DictURL, SifenURL: cfg.SifenURL}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.DictURL == "" {
		entries, err := dictsim.ReadEntries(bytes.NewReader(sampleEntries))
		if err != nil {
			return nil, fmt.Errorf("DICT simulator: %w", err)
		}
		s.Entries = len(entries)
		category := cfg.DictCategory
		if category == "" {
			category = "A"
		}
		s.Dict, err = dictsim.NewServer(ctx, dictsim.Config{Entries: entries, Category: category, Logger: logger.WithGroup("dictsim")})
		if err != nil {
			return nil, fmt.Errorf("DICT simulator: %w", err)
		}
		if err := s.Dict.Open(cfg.DictAddr); err != nil {
			return nil, fmt.Errorf("DICT simulator: %w", err)
		}
		s.DictURL = s.Dict.URL()
	}
	if s.SifenURL == "" {
		s.Sifen, err = sifensim.NewServer(sifensim.Config{Logger: logger.WithGroup("sifensim")})
		if err != nil {
			return nil, fmt.Errorf("SIFEN simulator: %w", err)
		}
		if err := s.Sifen.Open(cfg.SifenAddr); err != nil {
			return nil, fmt.Errorf("SIFEN simulator: %w", err)
		}
		s.SifenURL = s.Sifen.URL() + "/{env}"
	}
	return s, nil
}

// Close stops the simulators that run (the DICT's in-memory store goes
// with it). A nil *Simulators is none.
func (s *Simulators) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	if s.Sifen != nil {
		errs = append(errs, s.Sifen.Close())
	}
	if s.Dict != nil {
		errs = append(errs, s.Dict.Close())
	}
	return errors.Join(errs...)
}
