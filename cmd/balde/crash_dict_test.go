package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/alldrivers"
	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/internal/settings"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// validCNPJ returns the CNPJ of the twelve digits of base (mod 10^12) with
// its two check digits.
func validCNPJ(base int) string {
	d := []byte(fmt.Sprintf("%012d", base%1_000_000_000_000))
	for _, weights := range [][]int{{5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}, {6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}} {
		sum := 0
		for i, w := range weights {
			sum += int(d[i]-'0') * w
		}
		r := 0
		if sum%11 >= 2 {
			r = 11 - sum%11
		}
		d = append(d, byte('0'+r))
	}
	return string(d)
}

// dictRecorder stands between dict-lookup and the DICT simulator: it
// counts the getEntry requests that reached the DICT by EndToEndId, and
// delays each answer by a random 0–20 ms after the DICT charged it, the
// window in which a kill leaves a lookup charged remotely and unsettled
// locally.
type dictRecorder struct {
	next     http.Handler
	arrivals atomic.Int64
	mu       sync.Mutex
	seen     map[string]int
}

func (d *dictRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e2e := r.Header.Get(dict.HeaderEndToEndID); e2e != "" {
		d.mu.Lock()
		d.seen[e2e]++
		d.mu.Unlock()
	}
	d.arrivals.Add(1)
	rec := httptest.NewRecorder()
	d.next.ServeHTTP(rec, r)
	select {
	case <-time.After(time.Duration(rand.IntN(20)) * time.Millisecond):
	case <-r.Context().Done():
		return
	}
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (d *dictRecorder) seenCopy() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.seen))
	for k, v := range d.seen {
		out[k] = v
	}
	return out
}

// TestCrashDictLookup kills dict-lookup with SIGKILL at random instants
// while it looks up a file of keys (one PJ payer per key) against the DICT
// simulator, whose answers arrive 0–20 ms after it charged them, until it
// has been killed crashKills times, on SQLite and PostgreSQL. Then:
//   - a rerun completes the file: every key looked up, none failed or
//     refused;
//   - every bucket's balance is explained by its ledger (throttle.Replay);
//   - every hold is explained: a lookup was sent to the DICT only after
//     its hold was taken, never twice, and a hold without a recorded
//     answer belongs to a lookup a kill interrupted (at most one per kill
//     and sender — --senders 1 and the default: decision 0015 keeps such a
//     hold, since the DICT may have charged it);
//   - the DICT never refused a lookup (429): the mirror was never more
//     generous than the DICT.
func TestCrashDictLookup(t *testing.T) {
	t.Parallel() // its own server, files and processes: it waits beside the others
	for _, senders := range []int{1, dict.DefaultBatchSenders} {
		t.Run(fmt.Sprintf("senders%d", senders), func(t *testing.T) { crashDictLookup(t, senders) })
	}
}

func crashDictLookup(t *testing.T, senders int) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		kills := crashKills(t)
		sim := startDictSim(t, "A", false)
		rec := &dictRecorder{next: sim, seen: make(map[string]int)}
		dictURL := httptest.NewServer(rec)
		t.Cleanup(dictURL.Close)
		db := sqlstoretest.DSN(t, engine)

		// One PJ payer per key (1,000 tokens each): every run starts from
		// the top, and gets through about 5 keys before its kill, so the
		// first keys' payers pay for every run and keep the holds of the
		// lookups a kill interrupted (20 tokens each, decision 0015), far
		// within their buckets.
		keys := 40
		if reliabilityLong() {
			keys = 300
		}
		var b strings.Builder
		b.WriteString("key,payer\n")
		for i := range keys {
			fmt.Fprintf(&b, "%s,%s\n", foundKeys[i%len(foundKeys)], validCNPJ(112_223_330_000+7919*i))
		}
		file := writeFile(t, t.TempDir(), "keys.csv", []byte(b.String()))
		args := []string{"dict-lookup", "--db", db, "--dict-url", dictURL.URL, "--dict-participant", "12345678",
			"--dict-category", "A", "--no-wait", "--senders", strconv.Itoa(senders), "--json", file}

		killed, finished := 0, 0
		for i := 0; killed < kills; i++ {
			require.Less(t, i, 3*kills+10, "%d runs for %d kills: the runs end before their kill", i, killed)
			child := childCommand(t, time.Time{}, args...)
			var out, errOut strings.Builder
			child.Stdout, child.Stderr = &out, &errOut
			// Kill once this run is looking up (a request reached the DICT)
			// at a random instant up to 100 ms after: before a hold, between
			// the hold and the request, while the answer is on its way, or
			// between the answer and its settle and record.
			if killAfterArrival(t, child, &rec.arrivals, 100*time.Millisecond, fmt.Sprintf("dict-lookup run %d", i)) {
				killed++
			} else {
				finished++
				t.Logf("run %d ended before its kill:\n%s", i, errOut.String())
			}
		}
		sentBefore := len(rec.seenCopy())

		// Recovery: a rerun goes through the whole file.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		code, stdout, stderr := runIn(ctx, nil, "", nil, args...)
		items, sum := jsonLines[dictlookup.LookupRecord](t, stdout)
		require.Len(t, items, keys, "the rerun completes the file (exit %d): %s", code, stderr)
		require.Equal(t, keys, sum.Sent, "rerun: every key looked up (none failed, none refused): %+v\n%s", sum, stderr)

		// Every bucket's balance is explained by its ledger.
		cfg := settings.Default()
		cfg.DB, cfg.DictParticipant, cfg.DictCategory = db, "12345678", "A"
		ledgers := replayAllLedgers(t, cfg)
		require.NotEmpty(t, ledgers)

		// Every hold is explained.
		held := make(map[string]bool) // EndToEndIds with a take
		for _, entries := range ledgers {
			for _, e := range entries {
				if e.Reason == throttle.LedgerTake && e.Ref != "" {
					held[e.Ref] = true
				}
			}
		}
		recorded := dictLookupRecords(t, db)
		atDICT := rec.seenCopy()
		twice, unsentHolds, inFlight := 0, 0, 0
		for e2e, n := range atDICT {
			require.True(t, held[e2e], "lookup %s reached the DICT without a hold", e2e)
			if n > 1 {
				twice++
			}
		}
		for e2e := range held {
			switch {
			case recorded[e2e]:
				// answered, settled and recorded
			case atDICT[e2e] > 0:
				inFlight++ // charged by the DICT; the kill came before the settle
			default:
				unsentHolds++ // the kill came between the hold and the request
			}
		}
		for e2e := range recorded {
			require.True(t, held[e2e], "lookup %s recorded without a hold", e2e)
		}
		stats := sim.Stats()
		t.Logf("%s: %d kills (%d runs ended first); %d lookups reached the DICT before the rerun; %d holds: %d settled and recorded, "+
			"%d of lookups in flight at a kill, %d of lookups killed before their request; %d sent twice; remote 429s %d; %d buckets explained by their ledger; rerun %+v",
			engine, killed, finished, sentBefore, len(held), len(held)-inFlight-unsentHolds, inFlight, unsentHolds, twice,
			stats.Total(http.StatusTooManyRequests), len(ledgers), sum)
		require.Zero(t, twice, "lookups sent twice under one EndToEndId")
		require.LessOrEqual(t, inFlight+unsentHolds, killed*senders, "holds left without an answer: at most one per kill and sender")
		require.Zero(t, stats.Total(http.StatusTooManyRequests), "the DICT refused a lookup: the mirror was more generous")
	})
}

// dictLookupRecords returns the EndToEndIds of the lookups recorded in db.
func dictLookupRecords(t *testing.T, db string) map[string]bool {
	t.Helper()
	store, err := alldrivers.Open(context.Background(), db, sqlstore.Options{})
	require.NoError(t, err)
	defer store.Close()
	var ids []string
	require.NoError(t, store.ReadDB().Select(&ids, `SELECT end_to_end_id FROM balde_dict_lookups`))
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}
