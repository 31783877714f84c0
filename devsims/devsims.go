// Package devsims runs the DICT and SIFEN simulators (dict/dictsim,
// sifen/sifensim) in-process for a development or demo setup with no
// credentials, as "balde serve" does when no endpoint is configured; an
// application embedding balde links them only when it asks. Like the
// simulators, it imports nothing of dict, sifen or throttle.
package devsims

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"

	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/sifen/sifensim"
)

// sampleEntries are the DICT simulator's keys, a copy of
// dict/testdata/entries.csv (a test keeps the two equal).
//
//go:embed entries.csv
var sampleEntries []byte

// Config says which simulators to start and where.
type Config struct {
	// DictURL and SifenURL are the configured endpoints: a simulator starts
	// only for the one left empty, and a configured one is returned as it is.
	DictURL, SifenURL string
	// DictCategory is the DICT simulator's participant category, A to H
	// (empty: A), whose limits balde mirrors.
	DictCategory string
	// DictAddr and SifenAddr are the listen addresses (empty: DefaultAddr).
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
	Dict    *dictsim.Server
	Entries int // the number of sample keys the DICT simulator holds
	Sifen   *sifensim.Server
	// DictURL and SifenURL are the base URLs, the configured ones or the
	// simulators' (SIFEN's with "{env}" for the environment, test or prod).
	DictURL, SifenURL string
}

// Start starts the simulators cfg leaves without an endpoint: dictsim (its
// own in-memory buckets, with the sample entries and DictCategory) and
// sifensim (SIFEN's rules with their defaults), each listening when Start
// returns. On an error nothing is left running. The DICT simulator runs
// until Close, not until ctx ends.
func Start(ctx context.Context, cfg Config) (_ *Simulators, err error) {
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	s := &Simulators{DictURL: cfg.DictURL, SifenURL: cfg.SifenURL}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if s.DictURL == "" {
		var entries []dictsim.Entry
		if entries, err = dictsim.ReadEntries(bytes.NewReader(sampleEntries)); err == nil {
			s.Entries = len(entries)
			s.Dict, err = dictsim.NewServer(ctx, dictsim.Config{Entries: entries, Category: cfg.DictCategory, Logger: logger.WithGroup("dictsim")})
		}
		if err == nil {
			err = s.Dict.Open(cmp.Or(cfg.DictAddr, DefaultAddr))
		}
		if err != nil {
			return nil, fmt.Errorf("DICT simulator: %w", err)
		}
		s.DictURL = s.Dict.URL()
	}
	if s.SifenURL == "" {
		if s.Sifen, err = sifensim.NewServer(sifensim.Config{Logger: logger.WithGroup("sifensim")}); err == nil {
			err = s.Sifen.Open(cmp.Or(cfg.SifenAddr, DefaultAddr))
		}
		if err != nil {
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
