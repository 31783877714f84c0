package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/inspect"
	"github.com/balde-throttle/balde/sifen"
	"github.com/balde-throttle/balde/sifen/sifensim"
	"github.com/balde-throttle/balde/sifen/sifentest"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/web"
)

// rucViews is what every view of a RUC's gate says about its wait: the
// admin list, the bucket's page, the JSON API and the documents pages'
// check (Sender.RUCWait).
type rucViews struct {
	List, Detail  string        // the admin pages' "cooldown 7s", "" when none
	API, RUCWait  time.Duration // the JSON API's retry_after_seconds, RUCWait's RetryAfter
	APISev, State string
}

func (e *env) rucViews(t *testing.T, ruc sifen.RUC) rucViews {
	t.Helper()
	key := sifen.RecepcionKey(sifen.EnvTest, ruc)
	path := fmt.Sprintf("/admin/buckets/%s/%s/%s", key.Policy, key.Env, key.Identifier)
	var v rucViews
	list := document(t, e.get("/admin/buckets?policy="+key.Policy, asAdmin))
	v.List = strings.TrimSpace(row(t, list, ruc.Number)["Cooldown / block"].Text())
	v.Detail = strings.TrimSpace(document(t, e.get(path, asAdmin)).Find(".state-wait").Text())
	api := decode[map[string]any](t, e.get("/api/buckets/"+key.Policy+"/"+key.Env+"/"+key.Identifier, asAdmin))
	v.API = time.Duration(api["retry_after_seconds"].(float64) * float64(time.Second))
	v.APISev, v.State = api["severity"].(string), api["state"].(string)
	d, err := e.sender.RUCWait(context.Background(), sifen.EnvTest, ruc)
	require.NoError(t, err)
	v.RUCWait = d.RetryAfter
	return v
}

// TestRUCGateIsOneState is issue 19 item 3: a RUC's gate is one state, its
// SIFEN_RECEPCION_LOTE bucket, and every view reads it. What was seen: an
// operator reset the RUC's bucket while it cooled down after a lot; the
// page said "Healthy, next request: now" while every send of the RUC was
// refused for the rest of the interval by a second state (the RUC gate's
// table), and those refusals were in neither the ledger nor /metrics. Now,
// before the reset every view says the same wait and a send is refused for
// it, with a ledger row and a metric; after it every view says now and the
// send goes.
func TestRUCGateIsOneState(t *testing.T) {
	// SIFEN itself (the simulator) asks 1 s between lots; balde keeps 10 s.
	e := newEnv(t, withStore(sqlstore.SQLite), withSifen(sifenConfig{sim: sifensim.Config{Interval: time.Second}}))
	ctx := context.Background()
	ruc := sifen.RUC{Number: "80069563", DV: 7}
	key := sifen.RecepcionKey(sifen.EnvTest, ruc)
	ids := e.importDocs(sifentest.Lote(sifentest.Docs(ruc.Number, 1, 3)...), sifen.EnvTest)
	require.Equal(t, http.StatusSeeOther, e.send(ids[0]).StatusCode)
	require.Equal(t, sifen.StatusSent, e.doc(ids[0]).Status)

	// 3 s after SIFEN's answer: 7 s to wait, said alike everywhere.
	e.clock.Advance(3 * time.Second)
	require.Equal(t, rucViews{List: "cooldown 7s", Detail: "cooldown 7s", API: 7 * time.Second, RUCWait: 7 * time.Second,
		APISev: "Healthy", State: "cooling down"}, e.rucViews(t, ruc))

	// A send now is refused for exactly that, and the refusal is a ledger
	// row and a metric like every refusal.
	out, err := e.sender.Send(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeBlocked, out.Status)
	require.Equal(t, throttle.ReasonCooldown, out.Decision.Reason)
	require.Equal(t, 7*time.Second, out.Decision.RetryAfter)
	refusals, err := e.reader.Ledger(ctx, inspect.LedgerQuery{Key: &key, Reasons: []throttle.LedgerReason{throttle.LedgerRefusedCooldown}})
	require.NoError(t, err)
	require.Len(t, refusals, 1)
	require.Equal(t, fmt.Sprintf("doc:%d", ids[1]), refusals[0].Ref)
	require.Contains(t, body(t, e.get("/metrics")), `balde_throttle_refusals_total{policy="SIFEN_RECEPCION_LOTE",reason="cooldown"} 1`)

	// The reset page says what a reset does not do to SIFEN's own block.
	confirm := document(t, e.get("/admin/buckets/"+key.Policy+"/test/"+ruc.Number+"/reset", asAdmin))
	require.Contains(t, confirm.Find(".remote-block").Text(), "does not lift a block SIFEN itself imposed after a 0301")
	resp := e.post("/admin/buckets/"+key.Policy+"/test/"+ruc.Number+"/reset", url.Values{"confirm": {"yes"}}, asAdmin)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	page := document(t, e.get(resp.Header.Get("Location"), asAdmin))
	require.Contains(t, page.Find(".flash").Text(), "A block SIFEN itself imposed after a 0301 is not lifted by it")

	// After the reset every view says now, and the send goes: the views
	// and the gate are one state.
	require.Equal(t, rucViews{Detail: "none", APISev: "Healthy"}, e.rucViews(t, ruc))
	out, err = e.sender.Send(ctx, ids[1])
	require.NoError(t, err)
	require.Equal(t, sifen.OutcomeSent, out.Status)
	require.Equal(t, int64(2), e.sifenSends(t))

	// And again 10 s from that answer.
	e.clock.Advance(4 * time.Second)
	require.Equal(t, rucViews{List: "cooldown 6s", Detail: "cooldown 6s", API: 6 * time.Second, RUCWait: 6 * time.Second,
		APISev: "Healthy", State: "cooling down"}, e.rucViews(t, ruc))
}

// TestBucketWaitSaysWhy: a RUC's wait says its reason in every view: a
// block after SIFEN's 0301 with its level, a cooldown while a lot is on
// the wire.
func TestBucketWaitSaysWhy(t *testing.T) {
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		st   throttle.BucketState
		want string
	}{
		{"interval", throttle.BucketState{At: now, CooldownLeft: 7 * time.Second}, "cooldown 7s"},
		{"on the wire", throttle.BucketState{At: now, CooldownLeft: 10 * time.Second,
			Bucket: throttle.Bucket{HeldUntil: now.Add(time.Minute)}}, "cooldown 10s (a request on the wire)"},
		{"0301 block", throttle.BucketState{At: now, BlockLeft: 20 * time.Minute, Bucket: throttle.Bucket{BlockLevel: 2}},
			"blocked 20m0s (block 2 in a row)"},
		{"remote block", throttle.BucketState{At: now, BlockLeft: 90 * time.Second}, "blocked 1m30s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, web.FormatBucketWait(tt.st))
		})
	}
}
