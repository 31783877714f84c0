package dict_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// A remote 429 naming no bucket makes the Transport read the participant's
// anti-scan balance (GET /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN) and
// sync it. Another lookup of this process may be in flight, or may have
// been charged and settled, around that read: the sync leaves its hold out
// either way, so the mirror never ends above the DICT.
//
//   - the read answered while the other lookup is held before the DICT:
//     the DICT's 45 minus its hold, then its refund: exactly 44.
//
// A lookup that starts while the read is on the wire waits for it
// (decision 0180), so the read can no longer be answered before a lookup
// of this process is charged and applied after its refund.
//
// A gate in front of the simulator answers the first lookup with a 429 and
// holds one request until the other has ended, whatever the machine's load.
func TestParticipantReadAfter429LeavesHoldsOut(t *testing.T) {
	tests := []struct {
		name string
		// hold is the request the gate holds until the other one ends:
		// the other lookup before it reaches the DICT, or the participant
		// read's answer after the DICT read it.
		hold  string
		local int64
	}{
		{"ReadWhileLookupInFlight", "/entries/", 44},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
				read := func(r *http.Request) bool {
					return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/policies/"+dict.PolicyEntriesReadParticipantAntiscan)
				}
				isLookup := func(r *http.Request) bool {
					return r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/entries/")
				}
				var refuse atomic.Bool // the next lookup gets a 429
				gate := &holdGate{answerLater: read,
					hold: func(r *http.Request) bool {
						if tt.hold == "/policies/" {
							return read(r)
						}
						return isLookup(r)
					},
					before: func(w http.ResponseWriter, r *http.Request) bool {
						if !isLookup(r) || !refuse.CompareAndSwap(true, false) {
							return false
						}
						w.Header().Set("Retry-After", "30")
						w.Header().Set("Content-Type", dict.ContentTypeProblemXML)
						w.WriteHeader(http.StatusTooManyRequests)
						_, _ = w.Write([]byte(problemXML(429, "RateLimited", "")))
						return true
					}}
				e := newEnv(t, engine, envConfig{SimCategory: "H", Gate: gate.wrap})
				// Another app instance, with a mirror of its own, spends 5
				// of the participant's tokens at the DICT.
				other := e.newClient(mustLimiter(t, e), nil)
				for i := range 5 {
					_, err := other.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(100 + i)})
					require.NoError(t, err)
				}
				require.Equal(t, int64(45), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))
				require.Equal(t, int64(50), e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))

				refused := func() error { // answered 429 by the gate
					_, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(1)})
					var remote *dict.RemoteError
					if !errors.As(err, &remote) || remote.Status != http.StatusTooManyRequests {
						return errors.Join(errors.New("want a remote 429"), err)
					}
					return nil
				}
				lookup := func() error {
					res, err := e.client.GetEntry(e.ctx, dict.LookupRequest{Key: knownPhone, PayerID: makeCPF(2)})
					if err == nil && !res.Decision.Allowed {
						err = errors.New("lookup refused locally")
					}
					return err
				}
				first, second := lookup, refused // the held one first
				if tt.hold == "/policies/" {
					first, second = refused, lookup
				}
				// The 429 is for the participant read's lookup: the first
				// when the read's answer is held, else the second.
				refuse.Store(tt.hold == "/policies/")
				gate.play(t, first, second, func() { refuse.Store(tt.hold == "/entries/") })

				require.Equal(t, int64(1), e.stats().Count(dict.OpGetBucketState, http.StatusOK), "the participant was read once")
				require.Equal(t, int64(44), e.remoteTokens(dict.PolicyEntriesReadParticipantAntiscan, ispb))
				local := e.tokens(dict.PolicyEntriesReadParticipantAntiscan, ispb)
				require.LessOrEqual(t, local, int64(44), "the mirror is never above the DICT")
				require.Equal(t, tt.local, local)
			})
		})
	}
}
