package view_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

func TestAPIBucketDetailJSON(t *testing.T) {
	at := time.Date(2026, 3, 2, 12, 0, 0, 0, time.FixedZone("PYT", -3*3600))
	k := throttle.Key{Policy: "P", Env: "test", Identifier: "1"}
	st := throttle.BucketState{Bucket: throttle.Bucket{Key: k, Tokens: 3}, Stored: true, At: at}
	entries := []throttle.LedgerEntry{{ID: 7, Key: k, At: at, Delta: -1, Balance: 3, Reason: throttle.LedgerTake, Ref: "doc 9"}}

	b, err := json.Marshal(view.NewAPIBucketDetail(st, entries, nil))
	require.NoError(t, err)
	var got struct {
		Bucket map[string]any   `json:"bucket"`
		Ledger []map[string]any `json:"ledger"`
	}
	require.NoError(t, json.Unmarshal(b, &got))
	require.Equal(t, "P", got.Bucket["policy"])
	require.Equal(t, []map[string]any{{"id": 7.0, "at": "2026-03-02T15:00:00Z", "reason": throttle.LedgerTake.String(),
		"delta": -1.0, "balance": 3.0, "count": 1.0, "ref": "doc 9"}}, got.Ledger, "UTC, and a row of one request counts 1")

	b, err = json.Marshal(view.NewAPIBucketDetail(st, nil, nil))
	require.NoError(t, err)
	require.Contains(t, string(b), `"ledger":[]`, "no rows is an empty list, not null")
	b, err = json.Marshal(view.NewAPIBucketList(nil, nil))
	require.NoError(t, err)
	require.Equal(t, `{"buckets":[]}`, string(b))
}

func TestViewBucket(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	k := throttle.Key{Policy: "SIFEN_RECEPCION_LOTE", Env: "test", Identifier: "80069563"}
	st := throttle.BucketState{Policy: throttle.Policy{Name: k.Policy, Capacity: 1, RefillTokens: 1, RefillPeriod: 10 * time.Second},
		Bucket: throttle.Bucket{Key: k, LastSentAt: now.Add(-7 * time.Second)}, Stored: true, At: now, CooldownLeft: 3 * time.Second}
	ruc := func(throttle.Key) string { return "RUC" }
	en := i18n.New(i18n.English, time.UTC)

	v := view.ViewBucket(en, st, ruc)
	require.Equal(t, "RUC", v.Scope)
	require.Equal(t, "1", v.Capacity)
	require.Equal(t, "2026-03-02 11:59:53 UTC (7s ago)", v.LastSend)
	require.Equal(t, "cooldown 3s", v.Wait)
	require.Equal(t, "2026-03-02 11:59:53 UTC (7s ago)", view.WhenIn(en, en.Time, st.LastSentAt, st.At))

	idle := st
	idle.LastSentAt, idle.CooldownLeft = time.Time{}, 0
	v = view.ViewBucket(en, idle, nil)
	require.Equal(t, [3]string{"-", "-", "never"}, [3]string{v.Scope, v.Wait, v.LastSend})
	require.Equal(t, "never", view.WhenIn(en, en.Time, idle.LastSentAt, idle.At))

	orphan := st
	orphan.Orphan = true
	v = view.ViewBucket(i18n.New(i18n.Portuguese, time.UTC), orphan, ruc)
	require.Equal(t, [2]string{"?", "?"}, [2]string{v.Capacity, v.Refill})
	require.NotEqual(t, "unknown policy", v.Severity, "translated")
}
