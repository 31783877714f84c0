package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde"
	"github.com/balde-throttle/balde/internal/audit"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/web"
)

// "balde buckets shadow POLICY on|off" switches an inbound rule's (or an
// application policy's) shadow mode with a reason, recorded in the audit
// trail as cli:ACTOR each time; list and show mark the buckets "shadow".
// A DICT or SIFEN mirror policy, or no reason, is a usage error and
// changes nothing.
func TestBucketsShadow(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		db := sqlstoretest.DSN(t, engine)
		clock := newFakeTime(testEpoch)
		seedBuckets(t, db, clock)
		ctx := context.Background()
		ipKey := throttle.Key{Policy: web.PolicyInboundIP, Env: web.DefaultInboundEnv, Identifier: "203.0.113.7"}
		cfg := settings.Default()
		cfg.DB = db
		eng, err := openEngine(ctx, cfg, balde.Config{Clock: clock.Now, Inbound: &web.InboundConfig{IPLimit: 120}})
		require.NoError(t, err)
		_, err = eng.Inbound().Limiter.Take(ctx, "", throttle.Charge{Key: ipKey, Cost: 1})
		require.NoError(t, err)
		require.NoError(t, eng.Close(ctx))
		env := map[string]string{"BALDE_DB": db, "USER": "bob"}

		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"INBOUND_IP", "on"}, "buckets shadow: --reason is required (it is recorded in the audit trail)"},
			{[]string{"--reason", "x", "INBOUND_IP"}, "buckets shadow: want POLICY on or POLICY off"},
			{[]string{"--reason", "x", "INBOUND_IP", "maybe"}, "buckets shadow: want POLICY on or POLICY off"},
			{[]string{"--reason", "x", seededParticipant.Policy, "on"}, "buckets shadow: ENTRIES_READ_PARTICIPANT_ANTISCAN is a DICT or SIFEN mirror policy: shadow mode would spend the remote side's real allowance"},
			{[]string{"--reason", "x", sifen.PolicyRecepcionLote, "on"}, "buckets shadow: SIFEN_RECEPCION_LOTE is a DICT or SIFEN mirror policy: shadow mode would spend the remote side's real allowance"},
		} {
			code, _, stderr := runIn(ctx, clock, "", env, append([]string{"buckets", "shadow"}, tc.args...)...)
			require.Equal(t, ExitUsage, code, tc.args)
			oneStderrLine(t, stderr, tc.want)
		}
		require.Empty(t, auditTrail(t, db, clock), "nothing recorded")

		code, stdout, stderr := runIn(ctx, clock, "", env, "buckets", "shadow", "--actor", "alice", "--reason", "new limit, watch a week", "INBOUND_IP", "on")
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "INBOUND_IP is in shadow mode (by alice)")

		code, stdout, stderr = runIn(ctx, clock, "", env, "buckets", "list")
		require.Equal(t, ExitOK, code, stderr)
		require.Regexp(t, `\nINBOUND_IP \[shadow\] +203\.0\.113\.7 `, stdout)
		require.NotContains(t, stdout, seededParticipant.Policy+" [shadow]")
		code, stdout, stderr = runIn(ctx, clock, "", env, "buckets", "show", ipKey.String())
		require.Equal(t, ExitOK, code, stderr)
		require.Contains(t, stdout, "mode:")
		require.Contains(t, stdout, "shadow: refusals are recorded, requests admitted")
		code, stdout, _ = runIn(ctx, clock, "", env, "buckets", "show", "--json", ipKey.String())
		require.Equal(t, ExitOK, code)
		require.True(t, decodeJSON[showOut](t, stdout).Bucket.Shadow)

		code, _, stderr = runIn(ctx, clock, "", env, "buckets", "shadow", "--actor", "alice", "--reason", "the limit holds", "INBOUND_IP", "off")
		require.Equal(t, ExitOK, code, stderr)
		code, stdout, _ = runIn(ctx, clock, "", env, "buckets", "show", ipKey.String())
		require.Equal(t, ExitOK, code)
		require.NotContains(t, stdout, "shadow")

		entries := auditTrail(t, db, clock)
		require.Len(t, entries, 2)
		for i, want := range []struct{ reason, outcome string }{{"the limit holds", "shadow=off"}, {"new limit, watch a week", "shadow=on"}} {
			e := entries[i]
			require.Equal(t, "cli:alice", e.User)
			require.Equal(t, audit.ActionShadow, e.Action)
			require.Equal(t, "INBOUND_IP", e.Target)
			require.Equal(t, want.reason, e.Reason)
			require.Equal(t, want.outcome, e.Outcome)
			require.False(t, strings.Contains(e.Outcome, " "))
		}
	})
}
