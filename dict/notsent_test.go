package dict_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
)

// notSentEnv is a client on a store of its own (dsn) against a simulator.
type notSentEnv struct {
	dsn     string
	limiter *throttle.Limiter
	catalog *dict.Catalog
	sim     *dictsim.Server
	simURL  string
}

// newNotSentEnv builds the env; groupCommit puts the store behind a
// throttle.GroupCommit as serve does (a queued take is applied even after
// its context ends).
func newNotSentEnv(t *testing.T, engine sqlstore.Engine, groupCommit bool) *notSentEnv {
	t.Helper()
	sim, err := dictsim.NewServer(context.Background(), dictsim.Config{EntriesFile: "testdata/entries.csv", Category: "H", Logger: quiet})
	require.NoError(t, err)
	hs := httptest.NewServer(sim)
	t.Cleanup(hs.Close)
	e := &notSentEnv{dsn: sqlstoretest.DSN(t, engine), catalog: dict.NewCatalog("prod"), sim: sim, simURL: hs.URL}
	require.NoError(t, e.catalog.SetCategory("H"))
	var store throttle.Store = sqlstoretest.MustOpenDSN(t, e.dsn, nil)
	if groupCommit {
		g := throttle.NewGroupCommit(store, throttle.GroupCommitOptions{})
		t.Cleanup(func() { require.NoError(t, g.Close()) })
		store = g
	}
	e.limiter, err = throttle.NewLimiter(store, e.catalog, throttle.Config{})
	require.NoError(t, err)
	return e
}

func (e *notSentEnv) client(t *testing.T, baseURL string, hc *http.Client) *dict.Client {
	t.Helper()
	c, err := dict.NewClient(dict.ClientConfig{BaseURL: baseURL, Participant: ispb, Limiter: e.limiter, Catalog: e.catalog,
		HTTPClient: hc, Logger: quiet})
	require.NoError(t, err)
	return c
}

// balances returns the payer's and the participant's local balances.
func (e *notSentEnv) balances(t *testing.T) (payer, participant int64) {
	t.Helper()
	ctx := context.Background()
	p, err := e.limiter.State(ctx, e.catalog.Key(dict.PolicyEntriesReadUserAntiscan, cpfPF))
	require.NoError(t, err)
	q, err := e.limiter.State(ctx, e.catalog.Key(dict.PolicyEntriesReadParticipantAntiscan, ispb))
	require.NoError(t, err)
	return p.Tokens, q.Tokens
}

// A lookup that provably never reached the DICT leaves the payer's and the
// participant's balances as they were: its hold is refunded at once. Before,
// the hold stayed (20 and 3 a lookup: 5 lookups with the DICT unreachable
// took a PF payer from 100 to 0 for ~50 minutes).
func TestRequestThatNeverLeftIsRefunded(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		cases := []struct {
			name   string
			client func(t *testing.T, e *notSentEnv) *dict.Client
			check  func(t *testing.T, err error)
		}{
			{"ConnectionRefused", func(t *testing.T, e *notSentEnv) *dict.Client {
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				addr := ln.Addr().String()
				require.NoError(t, ln.Close()) // nothing listens there now
				return e.client(t, "http://"+addr, nil)
			}, func(t *testing.T, err error) {
				var op *net.OpError
				require.ErrorAs(t, err, &op)
			}},
			{"DNSFailure", func(t *testing.T, e *notSentEnv) *dict.Client {
				// A resolver whose server cannot be reached: the name does
				// not resolve, as when the DICT's DNS is down.
				resolver := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
					return nil, errors.New("no DNS server reachable")
				}}
				hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
					DialContext: (&net.Dialer{Resolver: resolver}).DialContext,
				}}
				return e.client(t, "http://dict.pi.rsfn.invalid:16522", hc)
			}, func(t *testing.T, err error) {
				var dnsErr *net.DNSError
				require.ErrorAs(t, err, &dnsErr)
			}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				e := newNotSentEnv(t, engine, false)
				c := tc.client(t, e)
				for range 5 {
					_, err := c.GetEntry(context.Background(), dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
					require.ErrorContains(t, err, "not sent, the hold is refunded")
					tc.check(t, err)
				}
				payer, participant := e.balances(t)
				require.Equal(t, int64(100), payer, "the payer's balance is unchanged")
				require.Equal(t, int64(50), participant, "the participant's balance is unchanged")
			})
		}

		// A take that waits on a lock held by another connection past the
		// request's deadline commits its hold after the deadline (group
		// commit applies a queued take whatever becomes of its context):
		// nothing is sent, and the hold comes back. Before, it stayed.
		t.Run("LockWaitPastTheDeadline", func(t *testing.T) {
			e := newNotSentEnv(t, engine, true)
			c := e.client(t, e.simURL, nil)
			ctx := context.Background()
			_, err := c.GetEntry(ctx, dict.LookupRequest{Key: knownEmail, PayerID: cpfPF}) // the rows exist now
			require.NoError(t, err)
			payerBefore, participantBefore := e.balances(t)
			require.Less(t, payerBefore, int64(100))
			sentBefore := e.sim.Stats().Count(dict.OpGetEntry, http.StatusOK)

			other := sqlstoretest.MustOpenDSN(t, e.dsn, nil)
			tx, err := other.DB().BeginTx(ctx, nil)
			require.NoError(t, err)
			if engine == sqlstore.Postgres {
				// The payer's row, held FOR UPDATE by another connection.
				_, err = tx.Exec(`SELECT tokens FROM balde_buckets WHERE identifier = $1 FOR UPDATE`, cpfPF)
			} else {
				// SQLite: another connection holds the write lock (BEGIN
				// IMMEDIATE) and writes.
				_, err = tx.Exec(`UPDATE balde_buckets SET tokens = tokens WHERE identifier = ?`, cpfPF)
			}
			require.NoError(t, err)
			released := make(chan struct{})
			go func() {
				defer close(released)
				time.Sleep(700 * time.Millisecond)
				_ = tx.Commit()
			}()

			reqCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			defer cancel()
			_, err = c.GetEntry(reqCtx, dict.LookupRequest{Key: knownEmail, PayerID: cpfPF})
			require.Error(t, err)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			select {
			case <-released:
			case <-time.After(10 * time.Second):
				t.Fatal("the other connection did not release its lock within 10 s")
			}
			require.Equal(t, sentBefore, e.sim.Stats().Count(dict.OpGetEntry, http.StatusOK), "nothing was sent")
			payer, participant := e.balances(t)
			require.Equal(t, payerBefore, payer, "the payer's balance is unchanged")
			require.Equal(t, participantBefore, participant, "the participant's balance is unchanged")
		})
	})
}
