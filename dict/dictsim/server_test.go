package dictsim_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestReadEntries(t *testing.T) {
	entries, err := dictsim.LoadEntries("../testdata/entries.csv")
	require.NoError(t, err)
	require.Len(t, entries, 7)
	require.Equal(t, dict.Entry{
		Key: "12ABC34501DE35", KeyType: dict.KeyCNPJ,
		Account: dict.Account{Participant: "87654321", Branch: "0042", AccountNumber: "0000011111", AccountType: "CACC"},
		Owner:   dict.Owner{Type: "LEGAL_PERSON", TaxIDNumber: "12ABC34501DE35", Name: "Nova Empresa Alfanumérica S.A."},
	}, entries[4])

	header := strings.Join(dictsim.EntriesHeader, ",") + "\n"
	tests := []struct {
		name, csv, want string
	}{
		{"BadHeader", "key,type\n", "header"},
		{"BadKey", header + "+0,PHONE,12345678,1,2,CACC,NATURAL_PERSON,52998224725,A\n", "line 2: key"},
		{"BadKeyType", header + "+5561988880000,TEL,12345678,1,2,CACC,NATURAL_PERSON,52998224725,A\n", "line 2: key_type"},
		{"BadISPB", header + "+5561988880000,PHONE,1234,1,2,CACC,NATURAL_PERSON,52998224725,A\n", "line 2: participant"},
		{"BadTaxID", header + "+5561988880000,PHONE,12345678,1,2,CACC,NATURAL_PERSON,52998224726,A\n", "line 2: owner_tax_id"},
		{"OwnerTypeMismatch", header + "+5561988880000,PHONE,12345678,1,2,CACC,LEGAL_PERSON,52998224725,A\n", "line 2: owner_type"},
		{"MissingName", header + "+5561988880000,PHONE,12345678,1,2,CACC,NATURAL_PERSON,52998224725,\n", "line 2: account, account_type and owner_name"},
		{"Duplicate", header + "+5561988880000,PHONE,12345678,1,2,CACC,NATURAL_PERSON,52998224725,A\n+5561988880000,PHONE,12345678,1,2,CACC,NATURAL_PERSON,52998224725,A\n", "line 3: key +5561988880000 already on line 2"},
		{"FieldCount", header + "+5561988880000,PHONE\n", "wrong number of fields"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dictsim.ReadEntries(strings.NewReader(tt.csv))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestServerOpenAndClose(t *testing.T) {
	ctx := context.Background()
	srv, err := dictsim.NewServer(ctx, dictsim.Config{EntriesFile: "../testdata/entries.csv", Logger: quiet})
	require.NoError(t, err)
	require.Equal(t, "", srv.URL())
	require.NoError(t, srv.Open("127.0.0.1:0"))
	require.True(t, strings.HasPrefix(srv.URL(), "http://127.0.0.1:"))
	require.Equal(t, "A", srv.Catalog().Category())

	req, err := http.NewRequest(http.MethodGet, srv.URL()+dict.APIPrefix+"/policies/KEYS_CHECK", nil)
	require.NoError(t, err)
	req.Header.Set(dict.HeaderRequestingParticipant, "12345678")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var got dict.GetPolicyResponse
	require.NoError(t, dict.Decode(resp.Body, &got))
	resp.Body.Close()
	require.Equal(t, dict.Policy{AvailableTokens: 70, Capacity: 70, RefillTokens: 70, RefillPeriodSec: 60, Name: dict.PolicyKeysCheck}, got.Policy)
	require.Equal(t, int64(1), srv.Stats().Count(dict.OpGetBucketState, http.StatusOK))

	// Real time: the clock cannot be moved.
	_, err = srv.Advance(time.Minute)
	require.Error(t, err)
	resp, err = http.Post(srv.URL()+"/sim/clock?advance=1m", "", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.WithinDuration(t, time.Now(), srv.Now(), time.Minute)

	require.NoError(t, srv.Close())
	_, err = http.Get(srv.URL() + "/sim/stats")
	require.Error(t, err, "closed")
}

func TestServerConfigErrors(t *testing.T) {
	ctx := context.Background()
	_, err := dictsim.NewServer(ctx, dictsim.Config{Category: "not a category", Logger: quiet})
	require.ErrorIs(t, err, dict.ErrInvalidCategory)
	_, err = dictsim.NewServer(ctx, dictsim.Config{EntriesFile: "missing.csv", Logger: quiet})
	require.Error(t, err)
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"dict": {"policies": {"KEYS_CHECK": {"capacity": 0}}}}`), 0o600))
	_, err = dictsim.NewServer(ctx, dictsim.Config{PolicyFile: bad, Logger: quiet})
	require.ErrorIs(t, err, dict.ErrInvalidPolicyFile)
	_, err = dictsim.NewServer(ctx, dictsim.Config{DB: "mysql://nope", Logger: quiet})
	require.Error(t, err)
}

// The simulator's fake clock moves only when told.
func TestFakeClock(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	srv, err := dictsim.NewServer(context.Background(), dictsim.Config{FakeClock: true, Start: start, Logger: quiet,
		DB: "sqlite://" + filepath.Join(t.TempDir(), "sim.db")})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })
	require.Equal(t, start, srv.Now())
	now, err := srv.Advance(8 * time.Minute)
	require.NoError(t, err)
	require.Equal(t, start.Add(8*time.Minute), now)
	_, err = srv.Advance(-time.Second)
	require.Error(t, err)
}

// TestOpenLoopbackOnly: the simulator answers without authentication, so
// it refuses to listen anywhere but on this machine.
func TestOpenLoopbackOnly(t *testing.T) {
	tests := []struct {
		addr string
		want string // "" = opens
	}{
		{"127.0.0.1:0", ""},
		{"localhost:0", ""},
		{"0.0.0.0:0", "loopback only"},
		{":0", "loopback only"},
		{"192.0.2.1:0", "loopback only"},
		{"127.0.0.1", "missing port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			srv, err := dictsim.NewServer(context.Background(), dictsim.Config{Logger: quiet})
			require.NoError(t, err)
			defer srv.Close()
			err = srv.Open(tt.addr)
			if tt.want == "" {
				require.NoError(t, err)
				require.NotEmpty(t, srv.URL())
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.Empty(t, srv.URL(), "nothing listens")
		})
	}
}
