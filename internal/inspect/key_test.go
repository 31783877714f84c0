package inspect_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/throttle"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want throttle.Key
		err  error
	}{
		{in: "SIFEN_RECEPCION_LOTE/test/80069563", want: throttle.Key{Policy: "SIFEN_RECEPCION_LOTE", Env: "test", Identifier: "80069563"}},
		{in: "LOT/prod/a/b", want: throttle.Key{Policy: "LOT", Env: "prod", Identifier: "a/b"}},
		{in: "POLICY/prod", err: inspect.ErrKeyForm},
		{in: "", err: inspect.ErrKeyForm},
		{in: "POLICY//id", err: throttle.ErrInvalidKey},
		{in: "POLICY/prod/", err: throttle.ErrInvalidKey},
		{in: "POLICY/prod/a\x00b", err: throttle.ErrInvalidKey},
	} {
		t.Run(tc.in, func(t *testing.T) {
			k, err := inspect.ParseKey(tc.in)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				require.Zero(t, k)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, k)
			require.Equal(t, tc.in, k.String())
		})
	}
}
