package throttle_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/throttle"
)

func TestAsRefusal(t *testing.T) {
	d := throttle.Decision{Reason: throttle.ReasonCooldown, RetryAfter: 7 * time.Second,
		Key: throttle.Key{Policy: "SIFEN_RECEPCION_LOTE", Env: "test", Identifier: "80012345-1"}}
	wrapped := fmt.Errorf("send lot: %w", &throttle.RefusedError{Op: "sifen siRecepLoteDE", Decision: d})

	got, ok := throttle.AsRefusal(wrapped)
	require.True(t, ok)
	require.Equal(t, d, got)
	require.Contains(t, wrapped.Error(), "sifen siRecepLoteDE refused locally")
	require.Contains(t, wrapped.Error(), "cooldown, retry after 7s")

	_, ok = throttle.AsRefusal(errors.New("connection reset"))
	require.False(t, ok, "a failure is not a refusal")
}
