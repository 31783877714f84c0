package balde_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/internal/waitfor"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
)

// lockedBuffer is a log destination safe for the engine's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// recordDefault makes slog.Default() record what it is given until the
// test ends (the test must not run in parallel).
func recordDefault(t *testing.T) *lockedBuffer {
	var b lockedBuffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &b
}

// runSims are a DICT simulator in category B and a SIFEN simulator on
// the test's clock, on loopback.
func runSims(t *testing.T, clock *throttle.ManualClock) (dictURL, sifenURL string) {
	quiet := slog.New(slog.DiscardHandler)
	ds, err := dictsim.NewServer(t.Context(), dictsim.Config{Category: "B", Logger: quiet})
	require.NoError(t, err)
	dh := httptest.NewServer(ds)
	t.Cleanup(func() { dh.Close(); ds.Close() })
	ss, err := sifensim.NewServer(sifensim.Config{Clock: clock.Now, Processing: time.Minute, Logger: quiet})
	require.NoError(t, err)
	sh := httptest.NewServer(ss)
	t.Cleanup(sh.Close)
	return dh.URL, sh.URL + "/{env}"
}

// Issue 19: the engine builds the DICT client and the SIFEN sender from its
// Config and Run does the background work serve did: the category learned
// at start, and a sent lot's documents reach approved by lot polling alone
// (no call of the application's). Every part logs through Config.Logger:
// slog.Default() receives nothing.
func TestRunPollsLotsAndLogsOnlyThroughTheLogger(t *testing.T) {
	defaultLog := recordDefault(t)
	clock := throttle.NewManualClock(time.Date(2026, 1, 2, 13, 0, 0, 0, time.UTC))
	dictURL, sifenURL := runSims(t, clock)
	var logs lockedBuffer
	ctx := t.Context()
	eng, err := balde.Open(ctx, balde.Config{
		DB:      "sqlite://" + filepath.Join(t.TempDir(), "balde.db"),
		Migrate: true,
		Clock:   clock.Now,
		Logger:  slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Dict:    &balde.DictConfig{BaseURL: dictURL, Participant: "12345678", LearnCategory: true},
		Sifen:   &balde.SifenConfig{BaseURL: sifenURL},
		Jobs:    balde.Jobs{SifenPollEvery: 10 * time.Millisecond},
	})
	require.NoError(t, err)
	defer eng.Close(context.WithoutCancel(ctx))
	require.NotNil(t, eng.Dict())
	require.NotNil(t, eng.Sifen())
	require.Empty(t, eng.DictCatalog().Category(), "Open sends nothing: the strictest until Run learns it")

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- eng.Run(runCtx) }()
	waitfor.Recv(t, eng.Started(), 10*time.Second, "Run's start work")
	require.Equal(t, "B", eng.DictCatalog().Category(), "learned from the DICT at start")

	docs, err := eng.Sifen().Import(ctx, sifentest.Lote(sifentest.Docs("80069563", 1, 2)...), sifen.EnvTest)
	require.NoError(t, err)
	out, err := eng.Sifen().Send(ctx, docs[0].ID, docs[1].ID)
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status, out.Message)

	clock.Advance(11 * time.Minute) // the lot's first query is due 10 min after the send
	waitfor.Until(t, 10*time.Second, func() bool {
		for _, d := range docs {
			got, err := eng.Sifen().Get(ctx, d.ID)
			if err != nil || got.Status != sifen.StatusApproved {
				return false
			}
		}
		return true
	}, "Run's lot polling approves the documents")

	stop()
	require.NoError(t, waitfor.Recv(t, done, 10*time.Second, "Run returning once its context ends"))
	require.Contains(t, logs.String(), "lot queued")
	require.Contains(t, logs.String(), "SIFEN lot queried")
	require.Empty(t, defaultLog.String(), "nothing logged to slog.Default()")
}

// Severity changes are logged only with LogSeverity: an application's own
// policies may empty by design.
func TestSeverityLogIsOptIn(t *testing.T) {
	for _, on := range []bool{false, true} {
		var logs lockedBuffer
		sms := throttle.PerMinute("SMS_PROVIDER", 2, 2)
		eng, err := balde.Open(t.Context(), balde.Config{
			DB:          "sqlite://" + filepath.Join(t.TempDir(), "balde.db"),
			Migrate:     true,
			Resolvers:   throttle.Resolvers{throttle.Policies{sms.Name: sms}},
			Logger:      slog.New(slog.NewTextHandler(&logs, nil)),
			LogSeverity: on,
		})
		require.NoError(t, err)
		key := throttle.Key{Policy: sms.Name, Env: "prod", Identifier: "+5561988880000"}
		_, err = eng.Limiter().Take(t.Context(), "", throttle.Charge{Key: key, Cost: 2})
		require.NoError(t, err)
		require.NoError(t, eng.Close(t.Context()))
		require.Equal(t, on, strings.Contains(logs.String(), "SMS_PROVIDER"), "LogSeverity %t: %s", on, logs.String())
	}
}

// Run's jobs stop with its context, and a second Run is refused.
func TestRunTwiceIsRefused(t *testing.T) {
	eng, err := balde.Open(t.Context(), balde.Config{DB: "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), Migrate: true})
	require.NoError(t, err)
	defer eng.Close(t.Context())
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	waitfor.Recv(t, eng.Started(), 10*time.Second, "Run's start work")
	require.Error(t, eng.Run(ctx))
	stop()
	require.NoError(t, waitfor.Recv(t, done, 10*time.Second, "Run returning once its context ends"))
}

// The period Run gives the DICT reconciliation: zero is every minute
// against a real DICT and off against a simulator (whose buckets see only
// this process's traffic); a period set is used, simulator or not; Off is
// off.
func TestRunReconcilePeriod(t *testing.T) {
	tests := []struct {
		name      string
		every     time.Duration
		simulator bool
		want      string // Run's log line, "" when off
	}{
		{"AutoRealDICT", 0, false, "every=1m0s"},
		{"AutoSimulator", 0, true, ""},
		{"SetSimulator", 30 * time.Second, true, "every=30s"},
		{"Off", balde.Off, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs lockedBuffer
			eng, err := balde.Open(t.Context(), balde.Config{
				DB: "sqlite://" + filepath.Join(t.TempDir(), "balde.db"), Migrate: true,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Dict:   &balde.DictConfig{BaseURL: "http://127.0.0.1:1", Participant: "12345678", Simulator: tt.simulator},
				Jobs:   balde.Jobs{DictReconcileEvery: tt.every},
			})
			require.NoError(t, err)
			defer eng.Close(t.Context())
			ctx, stop := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- eng.Run(ctx) }()
			waitfor.Recv(t, eng.Started(), 10*time.Second, "Run's start work")
			stop()
			require.NoError(t, waitfor.Recv(t, done, 10*time.Second, "Run returning once its context ends"))
			line := ""
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, "DICT reconciliation on") {
					line = l
				}
			}
			if tt.want == "" {
				require.Empty(t, line)
				return
			}
			require.Contains(t, line, tt.want)
		})
	}
}
