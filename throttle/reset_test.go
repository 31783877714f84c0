package throttle_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

// What was seen: a reset erased "Last send".
func TestResetKeepsTheLastSend(t *testing.T) {
	e := throttletest.NewMemEnv(t, fill, gate)
	k := throttle.Key{Policy: fill.Name, Env: "prod", Identifier: "a"}
	require.True(t, e.Take(k, 95).Allowed)
	sent := e.Clock.Now()
	e.Clock.Advance(time.Second)
	st, err := e.Limiter.Reset(context.Background(), k, "ana")
	require.NoError(t, err)
	require.Equal(t, fill.Capacity, st.Tokens)
	require.True(t, sent.Equal(st.LastSentAt), "last send %s", st.LastSentAt)

	// During a cooldown the reset must clear it, and the cooldown runs
	// from the last send, so the row forgets it; what the CLI and API
	// read (State, List) still has it, from the ledger's take.
	g := throttle.Key{Policy: gate.Name, Env: "test", Identifier: "80069563"}
	require.True(t, e.Take(g, 1).Allowed)
	sent = e.Clock.Now()
	e.Clock.Advance(2 * time.Second)
	st, err = e.Limiter.Reset(context.Background(), g, "ana")
	require.NoError(t, err)
	require.Zero(t, st.CooldownLeft)
	require.True(t, sent.Equal(st.LastSentAt), "Reset's answer: last send %s", st.LastSentAt)
	require.True(t, sent.Equal(e.State(g).LastSentAt), "State: last send %s", e.State(g).LastSentAt)
	page, err := e.Reader.List(context.Background(), inspect.Filter{Policy: gate.Name})
	require.NoError(t, err)
	require.Len(t, page.States, 1)
	require.True(t, sent.Equal(page.States[0].LastSentAt), "List: last send %s", page.States[0].LastSentAt)
	require.True(t, e.Take(g, 1).Allowed, "the cooldown is cleared")
}
