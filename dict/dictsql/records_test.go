package dictsql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsql"
	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/sqlstore"
	"github.com/balde-throttle/balde/throttle/sqlstore/sqlstoretest"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

const (
	ispb     = "12345678"
	cpfPF    = "52998224725"
	cnpjPJ   = "11222333000181"
	otherCPF = "11144477735"
)

func mustRecords(t *testing.T, engine sqlstore.Engine) *dictsql.Records {
	t.Helper()
	s := sqlstoretest.MustOpen(t, engine, throttle.NewManualClock(throttletest.Epoch).Now)
	return dictsql.NewRecords(s.DB(), s.ReadDB())
}

func TestRecords(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		r := mustRecords(t, engine)
		at := throttletest.Epoch
		l := dict.Lookup{EndToEndID: "E12345678202601020304ab3Cd5Ef7Gh", Env: "prod", PayerID: cnpjPJ, KeyType: dict.KeyEVP,
			Policy: dict.PolicyEntriesReadUserAntiscanV2, Participant: ispb, Status: 200, LookedUpAt: at}
		require.NoError(t, r.RecordLookup(ctx, l))
		got, err := r.FindLookup(ctx, l.EndToEndID)
		require.NoError(t, err)
		require.Equal(t, l, got)

		require.NoError(t, r.MarkPaid(ctx, l.EndToEndID, at.Add(time.Minute)))
		require.NoError(t, r.MarkPaid(ctx, l.EndToEndID, at.Add(time.Hour)), "a second payment keeps the first time")
		got, err = r.FindLookup(ctx, l.EndToEndID)
		require.NoError(t, err)
		require.Equal(t, at.Add(time.Minute), got.PaidAt)

		// The same EndToEndId looked up again replaces the row, keeping the payment.
		l.Status = 404
		require.NoError(t, r.RecordLookup(ctx, l))
		got, err = r.FindLookup(ctx, l.EndToEndID)
		require.NoError(t, err)
		require.Equal(t, 404, got.Status)
		require.Equal(t, at.Add(time.Minute), got.PaidAt)

		_, err = r.FindLookup(ctx, "E00000000202601020304ab3Cd5Ef7Gh")
		require.ErrorIs(t, err, dict.ErrUnknownEndToEndID)

		_, _, ok, err := r.LearnedCategory(ctx, "prod", ispb)
		require.NoError(t, err)
		require.False(t, ok)
		require.NoError(t, r.SaveCategory(ctx, "prod", ispb, "G", at))
		require.NoError(t, r.SaveCategory(ctx, "prod", ispb, "H", at))
		cat, _, ok, err := r.LearnedCategory(ctx, "prod", ispb)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "H", cat)
		_, _, ok, err = r.LearnedCategory(ctx, "test", ispb)
		require.NoError(t, err)
		require.False(t, ok, "categories are per env")

		n, err := r.PruneLookups(ctx, at.Add(time.Second), 10)
		require.NoError(t, err)
		require.Equal(t, int64(1), n)
		_, err = r.FindLookup(ctx, l.EndToEndID)
		require.ErrorIs(t, err, dict.ErrUnknownEndToEndID)
	})
}

func TestMonitors(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		r := mustRecords(t, engine)
		at := throttletest.Epoch
		seq := 0
		record := func(payer, participant string, status int, when time.Time, paid bool) {
			t.Helper()
			seq++
			e2e := fmt.Sprintf("E%s202601020304%011d", participant, seq)
			require.NoError(t, r.RecordLookup(ctx, dict.Lookup{EndToEndID: e2e, Env: "prod", PayerID: payer, KeyType: dict.KeyEmail,
				Policy: dict.PolicyEntriesReadUserAntiscan, Participant: participant, Status: status, LookedUpAt: when}))
			if paid {
				require.NoError(t, r.MarkPaid(ctx, e2e, when))
			}
		}
		// Participant 1: 100 lookups, 7 404s (7 %: not above the limit).
		// Its payer cpfPF: 100 lookups, 7 % 404s; paid 31 times.
		for i := range 100 {
			status := 200
			if i < 7 {
				status = 404
			}
			record(cpfPF, ispb, status, at, status == 200 && i < 38)
		}
		// Participant 2: 120 lookups by one PJ payer, 25 404s (about 21 %):
		// suspicious on both counts.
		for i := range 120 {
			status := 200
			if i < 25 {
				status = 404
			}
			record(cnpjPJ, "87654321", status, at, false)
		}
		// A payer under 100 lookups is not listed; 500s and 429s are not
		// lookups the DICT answered; old lookups are outside the window.
		for range 10 {
			record(otherCPF, "11111111", 404, at, false)
		}
		record(otherCPF, ispb, 500, at, false)
		record(otherCPF, ispb, 429, at, false)
		for range 5 {
			record(otherCPF, ispb, 404, at.Add(-48*time.Hour), false)
		}

		a, err := r.Monitors(ctx, at.Add(-24*time.Hour))
		require.NoError(t, err)
		require.Equal(t, int64(230), a.Lookups)
		require.Equal(t, int64(31), a.Payments)
		require.InDelta(t, 230.0/31.0, a.LookupsPerPayment(), 1e-9)
		require.Equal(t, []dict.ScanCount{
			{ID: "11111111", Lookups: 10, NotFound: 10, Suspicious: true},
			{ID: ispb, Lookups: 100, NotFound: 7, Suspicious: false}, // exactly 7 %
			{ID: "87654321", Lookups: 120, NotFound: 25, Suspicious: true},
		}, a.Participants)
		require.Equal(t, []dict.ScanCount{
			{ID: cnpjPJ, Lookups: 120, NotFound: 25, Suspicious: true},
			{ID: cpfPF, Lookups: 100, NotFound: 7, Suspicious: false},
		}, a.Payers)
		require.Equal(t, int64(208), a.Payers[0].NotFoundPerMille())
	})
}

// TestEveryStatementSurvivesARetry: Records.Retry (sqlstore.Store.Retry in
// balde) may run a statement again after a transient failure, possibly one
// whose first run landed. Every statement is idempotent and list reads are
// not doubled: a Retry that runs each statement twice gives the same
// results as one that runs it once.
func TestEveryStatementSurvivesARetry(t *testing.T) {
	sqlstoretest.ForEachEngine(t, func(t *testing.T, engine sqlstore.Engine) {
		ctx := context.Background()
		s := sqlstoretest.MustOpen(t, engine, throttle.NewManualClock(throttletest.Epoch).Now)
		once := dictsql.NewRecords(s.DB(), s.ReadDB())
		twice := dictsql.NewRecords(s.DB(), s.ReadDB())
		tries := 0
		twice.Retry = func(_ context.Context, _ string, fn func() error) error {
			tries++
			_ = fn() // a first try whose effect landed before its connection died
			return fn()
		}
		at := throttletest.Epoch
		for i := range 120 {
			e2e := fmt.Sprintf("E%s202601020304%011d", ispb, i)
			status := 200
			if i%4 == 0 {
				status = 404
			}
			require.NoError(t, twice.RecordLookup(ctx, dict.Lookup{EndToEndID: e2e, Env: "prod", PayerID: cpfPF, KeyType: dict.KeyEmail,
				Policy: dict.PolicyEntriesReadUserAntiscan, Participant: ispb, Status: status, LookedUpAt: at}))
			if i%3 == 0 {
				require.NoError(t, twice.MarkPaid(ctx, e2e, at.Add(time.Duration(i)*time.Second)))
			}
		}
		require.NoError(t, twice.SaveCategory(ctx, "prod", ispb, "C", at))

		want, err := once.Monitors(ctx, at.Add(-time.Hour))
		require.NoError(t, err)
		got, err := twice.Monitors(ctx, at.Add(-time.Hour))
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Len(t, got.Participants, 1, "a retried list read is not doubled")
		require.Equal(t, int64(120), got.Lookups)
		require.Equal(t, int64(40), got.Payments)
		category, _, ok, err := twice.LearnedCategory(ctx, "prod", ispb)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "C", category)
		require.Positive(t, tries)
	})
}
