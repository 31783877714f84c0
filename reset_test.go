package balde_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// ResetBucket is "balde buckets reset": it refuses a key with no stored
// bucket and a reset without a reason, changing nothing; otherwise it fills
// the bucket, records the reset in the audit trail as cli:ACTOR with the
// reason and the tokens before and after, and says when a remote block
// stays (SIFEN's RUC gate).
func TestResetBucket(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		eng, err := balde.Open(ctx, balde.Config{DB: sqlstoretest.DSN(t, engine), Migrate: true})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })

		dictKey := throttle.Key{Policy: "ENTRIES_READ_PARTICIPANT_ANTISCAN", Env: eng.DictCatalog().Env(), Identifier: "12345678"}
		gateKey := throttle.Key{Policy: sifen.PolicyRecepcionLote, Env: "test", Identifier: "80069563"}
		for _, k := range []throttle.Key{dictKey, gateKey} {
			d, err := eng.Limiter().Take(ctx, "", throttle.Charge{Key: k, Cost: 1})
			require.NoError(t, err)
			require.True(t, d.Allowed, k.String())
		}
		before, err := eng.Limiter().State(ctx, dictKey)
		require.NoError(t, err)

		tests := []struct {
			name       string
			key        throttle.Key
			reason     string
			wantErr    error
			wantRemote bool
		}{
			{"no stored bucket", throttle.Key{Policy: dictKey.Policy, Env: dictKey.Env, Identifier: "87654321"}, "drill", balde.ErrNotStored, false},
			{"no reason", dictKey, "  ", balde.ErrNoReason, false},
			{"DICT bucket", dictKey, "key fixed", nil, false},
			{"SIFEN's RUC gate", gateKey, "SIFEN said so", nil, true},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				n := len(listAudit(t, eng))
				_, checkErr := eng.CheckReset(ctx, tt.key, tt.reason)
				r, err := eng.ResetBucket(ctx, tt.key, "alice", tt.reason)
				if tt.wantErr != nil {
					require.ErrorIs(t, checkErr, tt.wantErr)
					require.ErrorIs(t, err, tt.wantErr)
					require.Len(t, listAudit(t, eng), n, "nothing recorded")
					st, err := eng.Limiter().State(ctx, tt.key)
					require.NoError(t, err)
					if tt.key == dictKey {
						require.Equal(t, before.Tokens, st.Tokens, "unchanged")
					}
					return
				}
				require.NoError(t, checkErr)
				require.NoError(t, err)
				require.Equal(t, tt.wantRemote, r.RemoteBlockStays)
				require.Equal(t, r.After.Policy.Capacity, r.After.Tokens, "full")
				require.Less(t, r.Before.Tokens, r.After.Tokens)
				entries := listAudit(t, eng)
				require.Len(t, entries, n+1)
				e := entries[0]
				require.Equal(t, "cli:alice", e.User)
				require.Equal(t, audit.ActionReset, e.Action)
				require.Equal(t, tt.key.String(), e.Target)
				require.Equal(t, tt.reason, e.Reason)
				require.Equal(t, audit.ResetOutcome(r.Before.Tokens, r.After.Tokens), e.Outcome)
			})
		}
	})
}

func listAudit(t *testing.T, eng *balde.Engine) []audit.Entry {
	t.Helper()
	entries, err := eng.Audit().List(context.Background(), audit.Query{})
	require.NoError(t, err)
	return entries
}
