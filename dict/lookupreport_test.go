package dict_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/throttle"
)

func TestNewLookupRecord(t *testing.T) {
	req := dict.LookupRequest{Key: "+5561988880000", PayerID: "11144477735"}
	bucket := throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "11144477735"}
	refused := dict.Result[dict.GetEntryResponse]{Decision: throttle.Decision{Reason: throttle.ReasonEmpty, Key: bucket, RetryAfter: 90 * time.Second}}
	found := dict.Result[dict.GetEntryResponse]{EndToEndID: "E1", Decision: throttle.Decision{Allowed: true}, Response: &dict.GetEntryResponse{Entry: dict.Entry{
		KeyType: "PHONE", Account: dict.Account{Participant: "12345678", Branch: "0001", AccountNumber: "0007654321", AccountType: "CACC"},
		Owner: dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: "11144477735", Name: "Maria"}}}}
	allowed := dict.Result[dict.GetEntryResponse]{Decision: throttle.Decision{Allowed: true}}
	notFound := &dict.RemoteError{Op: "get entry", Status: 404, Problem: &dict.Problem{Type: dict.ProblemTypePrefix + "EntryNotFound"}}
	tooMany := &dict.RemoteError{Op: "get entry", Status: 429, RetryAfter: 2 * time.Second, Problem: &dict.Problem{Type: dict.ProblemTypePrefix + "RateLimitExceeded"}}
	inDoubt := fmt.Errorf("dict: get entry: %w", throttle.ErrOutcomeUnknown)

	tests := []struct {
		name string
		res  dict.BatchResult
		want dict.LookupRecord
	}{
		{"RefusedLocally", dict.BatchResult{Request: req, Result: refused, Waited: 1500 * time.Millisecond},
			dict.LookupRecord{Result: dict.LookupBlocked, Reason: "empty", RetryAfterS: 90, WaitS: 1.5,
				Message: "refused locally by ENTRIES_READ_USER_ANTISCAN/prod/11144477735, not sent"}},
		{"InterruptedWhileWaiting", dict.BatchResult{Request: req, Result: refused, Interrupted: true},
			dict.LookupRecord{Result: dict.LookupInterrupted, Reason: "empty", RetryAfterS: 90, Message: dict.MsgLookupInterrupted}},
		{"Found", dict.BatchResult{Request: req, Result: found},
			dict.LookupRecord{Result: dict.LookupSent, Status: 200, EndToEndID: "E1", KeyType: "PHONE", Participant: "12345678",
				Branch: "0001", Account: "0007654321", AccountType: "CACC", OwnerType: "NATURAL_PERSON", OwnerTaxID: "11144477735", OwnerName: "Maria"}},
		{"NoEntryIsAnAnswer", dict.BatchResult{Request: req, Result: allowed, Err: notFound},
			dict.LookupRecord{Result: dict.LookupSent, Status: 404, Reason: "EntryNotFound", Message: dict.MsgNoEntry}},
		{"RemoteRefusalFails", dict.BatchResult{Request: req, Result: allowed, Err: tooMany},
			dict.LookupRecord{Result: dict.LookupFailed, Status: 429, Reason: "RateLimitExceeded", RetryAfterS: 2, Message: tooMany.Error()}},
		{"CommitInDoubt", dict.BatchResult{Request: req, Result: allowed, Err: inDoubt},
			dict.LookupRecord{Result: dict.LookupFailed, Reason: "store commit in doubt", Message: inDoubt.Error()}},
		{"RequestFailed", dict.BatchResult{Request: req, Result: allowed, Err: errors.New("dial tcp: refused")},
			dict.LookupRecord{Result: dict.LookupFailed, Reason: "request failed", Message: "dial tcp: refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Key, tt.want.Payer = req.Key, req.PayerID
			require.Equal(t, tt.want, dict.NewLookupRecord(tt.res))
		})
	}
}

func TestLookupWriter(t *testing.T) {
	recs := []dict.LookupRecord{
		{Key: "+5561988880000", Payer: "11144477735", Status: 200, Result: dict.LookupSent, OwnerName: "Maria, da Silva"},
		{Key: "a@b.com", Payer: "11144477735", Result: dict.LookupBlocked, Reason: "empty", RetryAfterS: 1.25, Message: "refused"},
	}
	t.Run("CSV", func(t *testing.T) {
		var b bytes.Buffer
		w, err := dict.NewLookupWriter(&b, false)
		require.NoError(t, err)
		require.Equal(t, strings.Join(dict.LookupColumns, ",")+"\n", b.String(), "the header is written at once")
		for _, r := range recs {
			require.NoError(t, w.Write(r))
		}
		require.NoError(t, w.Close())
		require.Equal(t, strings.Join(dict.LookupColumns, ",")+"\n"+
			`+5561988880000,11144477735,200,,0,sent,0,,,,,,,,,"Maria, da Silva",`+"\n"+
			`a@b.com,11144477735,0,empty,1.25,blocked,0,,,,,,,,,,refused`+"\n", b.String())
	})
	t.Run("JSON", func(t *testing.T) {
		var b bytes.Buffer
		w, err := dict.NewLookupWriter(&b, true)
		require.NoError(t, err)
		for _, r := range recs {
			require.NoError(t, w.Write(r))
		}
		require.NoError(t, w.Close())
		var got []dict.LookupRecord
		require.NoError(t, json.Unmarshal(b.Bytes(), &got), b.String())
		require.Equal(t, recs, got)
	})
	t.Run("EmptyJSONIsAnArray", func(t *testing.T) {
		var b bytes.Buffer
		w, err := dict.NewLookupWriter(&b, true)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		var got []dict.LookupRecord
		require.NoError(t, json.Unmarshal(b.Bytes(), &got))
		require.Empty(t, got)
	})
}
