package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
)

// What was seen: a reset erased "Last send".
func TestResetKeepsTheLastSend(t *testing.T) {
	e := sevEnv(t, fill, gate)
	k := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	require.True(t, e.Take(k, 95).Allowed)
	sent := e.Clock.Now()
	e.Clock.Advance(time.Second)
	st, err := e.Limiter.Reset(context.Background(), k, "ana")
	require.NoError(t, err)
	require.Equal(t, fill.Capacity, st.Tokens)
	require.True(t, sent.Equal(st.LastSentAt), "last send %s", st.LastSentAt)

	// During a cooldown the reset must clear it, and the cooldown runs
	// from the last send: that one goes (the ledger still has it).
	g := throttle.Key{Policy: gate.Name, Env: "test", Identifier: "80069563"}
	require.True(t, e.Take(g, 1).Allowed)
	st, err = e.Limiter.Reset(context.Background(), g, "ana")
	require.NoError(t, err)
	require.Zero(t, st.CooldownLeft)
	require.True(t, e.Take(g, 1).Allowed)
}
