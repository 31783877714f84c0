package sifen_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

var ruc80069563 = sifen.RUC{Number: "80069563", DV: 1}

func newPolicyLimiter(t *testing.T, cfg sifen.PolicyConfig) (*throttle.Limiter, *throttle.ManualClock) {
	t.Helper()
	clock := throttle.NewManualClock(throttletest.Epoch)
	r, err := sifen.NewResolver(cfg)
	require.NoError(t, err)
	l, err := throttle.NewLimiter(throttletest.NewMemStore(clock.Now), r, throttle.Config{Clock: clock.Now})
	require.NoError(t, err)
	return l, clock
}

// step is one Take at an offset from the start.
type step struct {
	at          time.Duration
	key         throttle.Key
	wantAllowed bool
	wantReason  throttle.Reason
	wantWait    time.Duration
}

func run(t *testing.T, l *throttle.Limiter, clock *throttle.ManualClock, steps []step) {
	t.Helper()
	start := clock.Now()
	for i, s := range steps {
		clock.Set(start.Add(s.at))
		d, err := l.Take(context.Background(), "", throttle.Charge{Key: s.key, Cost: 1})
		require.NoError(t, err, "step %d", i)
		require.Equal(t, s.wantAllowed, d.Allowed, "step %d", i)
		require.Equal(t, s.wantReason, d.Reason, "step %d", i)
		require.Equal(t, s.wantWait, d.RetryAfter, "step %d", i)
	}
}

func TestRecepcionPolicyCooldown(t *testing.T) {
	l, clock := newPolicyLimiter(t, sifen.PolicyConfig{})
	test := sifen.RecepcionKey(sifen.EnvTest, ruc80069563)
	prod := sifen.RecepcionKey(sifen.EnvProd, ruc80069563)
	other := sifen.RecepcionKey(sifen.EnvTest, sifen.RUC{Number: "88888801", DV: 5})
	run(t, l, clock, []step{
		{at: 0, key: test, wantAllowed: true},
		{at: 0, key: prod, wantAllowed: true},  // another environment
		{at: 0, key: other, wantAllowed: true}, // another RUC
		{at: 3 * time.Second, key: test, wantReason: throttle.ReasonCooldown, wantWait: 7 * time.Second},
		// The one-token bucket refills exactly when the cooldown ends: it
		// never refuses first.
		{at: 10*time.Second - time.Nanosecond, key: test, wantReason: throttle.ReasonCooldown, wantWait: time.Nanosecond},
		{at: 10 * time.Second, key: test, wantAllowed: true},
	})
}

func TestRecepcionPolicyEnvOverrideAndPerMinute(t *testing.T) {
	l, clock := newPolicyLimiter(t, sifen.PolicyConfig{
		Interval:    5 * time.Second,
		EnvInterval: map[sifen.Env]time.Duration{sifen.EnvProd: 45 * time.Second},
		PerMinute:   3,
	})
	test := sifen.RecepcionKey(sifen.EnvTest, ruc80069563)
	prod := sifen.RecepcionKey(sifen.EnvProd, ruc80069563)
	run(t, l, clock, []step{
		{at: 0, key: prod, wantAllowed: true},
		{at: 44 * time.Second, key: prod, wantReason: throttle.ReasonCooldown, wantWait: time.Second},
		{at: 0, key: test, wantAllowed: true},
		{at: 5 * time.Second, key: test, wantAllowed: true},
		{at: 10 * time.Second, key: test, wantAllowed: true},
		// Three lots in the last minute: the fourth waits until the first
		// leaves the window, longer than the cooldown.
		{at: 15 * time.Second, key: test, wantReason: throttle.ReasonEmpty, wantWait: 45 * time.Second},
		{at: 60 * time.Second, key: test, wantAllowed: true},
	})
}

func TestResolver(t *testing.T) {
	r, err := sifen.NewResolver(sifen.PolicyConfig{})
	require.NoError(t, err)
	p, err := r.Resolve(sifen.RecepcionKey(sifen.EnvProd, ruc80069563))
	require.NoError(t, err)
	require.Equal(t, "SIFEN_RECEPCION_LOTE: 1/10s (capacity 1, continuous, every 10s at most)", p.String())
	require.NoError(t, p.Validate())

	for _, tc := range []struct {
		name    string
		key     throttle.Key
		wantErr error
	}{
		{"ErrUnknownPolicy", throttle.Key{Policy: "OTHER", Env: "test", Identifier: "80069563"}, throttle.ErrUnknownPolicy},
		{"ErrInvalidKeyEnv", throttle.Key{Policy: sifen.PolicyRecepcionLote, Env: "homolog", Identifier: "80069563"}, sifen.ErrInvalidEnv},
		{"ErrInvalidKeyRUC", throttle.Key{Policy: sifen.PolicyRecepcionLote, Env: "test", Identifier: "8006-9563"}, throttle.ErrInvalidKey},
		{"ErrUnknownPolicyLotQueries", throttle.Key{Policy: "SIFEN_CONSULTA_LOTE", Env: "test", Identifier: "10000000000000001"}, throttle.ErrUnknownPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Resolve(tc.key)
			require.ErrorIs(t, err, tc.wantErr)
		})
	}

	for name, cfg := range map[string]sifen.PolicyConfig{
		"NegativeInterval": {Interval: -time.Second},
		"UnknownEnv":       {EnvInterval: map[sifen.Env]time.Duration{"homolog": time.Second}},
		"PerMinuteTooBig":  {PerMinute: throttle.MaxRollingCapacity + 1},
	} {
		t.Run("Invalid"+name, func(t *testing.T) {
			_, err := sifen.NewResolver(cfg)
			require.Error(t, err)
		})
	}
}

func TestParseEnv(t *testing.T) {
	for _, s := range []string{"test", "prod"} {
		env, err := sifen.ParseEnv(s)
		require.NoError(t, err)
		require.Equal(t, s, string(env))
	}
	for _, s := range []string{"", "Test", "production", "homolog"} {
		_, err := sifen.ParseEnv(s)
		require.ErrorIs(t, err, sifen.ErrInvalidEnv, s)
	}
}
