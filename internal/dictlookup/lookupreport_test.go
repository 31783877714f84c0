package dictlookup_test

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
	"github.com/balde-throttle/balde/internal/dictlookup"
	"github.com/balde-throttle/balde/throttle"
)

// problemTypePrefix starts the type of a DICT problem.
const problemTypePrefix = "https://dict.pi.rsfn.net.br/api/v2/error/"

func TestNewLookupRecord(t *testing.T) {
	req := dict.LookupRequest{Key: "+5561988880000", PayerID: "11144477735"}
	bucket := throttle.Key{Policy: "ENTRIES_READ_USER_ANTISCAN", Env: "prod", Identifier: "11144477735"}
	refused := dict.Result[dict.GetEntryResponse]{Decision: throttle.Decision{Reason: throttle.ReasonEmpty, Key: bucket, RetryAfter: 90 * time.Second}}
	found := dict.Result[dict.GetEntryResponse]{EndToEndID: "E1", Decision: throttle.Decision{Allowed: true}, Response: &dict.GetEntryResponse{Entry: dict.Entry{
		KeyType: "PHONE", Account: dict.Account{Participant: "12345678", Branch: "0001", AccountNumber: "0007654321", AccountType: "CACC"},
		Owner: dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: "11144477735", Name: "Maria"}}}}
	allowed := dict.Result[dict.GetEntryResponse]{Decision: throttle.Decision{Allowed: true}}
	notFound := &dict.RemoteError{Op: "get entry", Status: 404, Problem: &dict.Problem{Type: problemTypePrefix + "EntryNotFound"}}
	tooMany := &dict.RemoteError{Op: "get entry", Status: 429, RetryAfter: 2 * time.Second, Problem: &dict.Problem{Type: problemTypePrefix + "RateLimitExceeded"}}
	inDoubt := fmt.Errorf("dict: get entry: %w", throttle.ErrOutcomeUnknown)

	tests := []struct {
		name string
		res  dict.BatchResult
		want dictlookup.LookupRecord
	}{
		{"RefusedLocally", dict.BatchResult{Request: req, Result: refused, Waited: 1500 * time.Millisecond},
			dictlookup.LookupRecord{Result: dictlookup.LookupBlocked, Reason: "empty", RetryAfterS: 90, WaitS: 1.5,
				Message: "refused locally by ENTRIES_READ_USER_ANTISCAN/prod/11144477735, not sent"}},
		{"InterruptedWhileWaiting", dict.BatchResult{Request: req, Result: refused, Interrupted: true},
			dictlookup.LookupRecord{Result: dictlookup.LookupInterrupted, Reason: "empty", RetryAfterS: 90, Message: dictlookup.MsgLookupInterrupted}},
		{"Found", dict.BatchResult{Request: req, Result: found},
			dictlookup.LookupRecord{Result: dictlookup.LookupSent, Status: 200, EndToEndID: "E1", KeyType: "PHONE", Participant: "12345678",
				Branch: "0001", Account: "0007654321", AccountType: "CACC", OwnerType: "NATURAL_PERSON", OwnerTaxID: "11144477735", OwnerName: "Maria"}},
		{"NoEntryIsAnAnswer", dict.BatchResult{Request: req, Result: allowed, Err: notFound},
			dictlookup.LookupRecord{Result: dictlookup.LookupSent, Status: 404, Reason: "EntryNotFound", Message: dictlookup.MsgNoEntry}},
		{"RemoteRefusalFails", dict.BatchResult{Request: req, Result: allowed, Err: tooMany},
			dictlookup.LookupRecord{Result: dictlookup.LookupFailed, Status: 429, Reason: "RateLimitExceeded", RetryAfterS: 2, Message: tooMany.Error()}},
		{"CommitInDoubt", dict.BatchResult{Request: req, Result: allowed, Err: inDoubt},
			dictlookup.LookupRecord{Result: dictlookup.LookupFailed, Reason: "store commit in doubt", Message: inDoubt.Error()}},
		{"RequestFailed", dict.BatchResult{Request: req, Result: allowed, Err: errors.New("dial tcp: refused")},
			dictlookup.LookupRecord{Result: dictlookup.LookupFailed, Reason: "request failed", Message: "dial tcp: refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.Key, tt.want.Payer = req.Key, req.PayerID
			require.Equal(t, tt.want, dictlookup.NewLookupRecord(tt.res))
		})
	}
}

func TestLookupWriter(t *testing.T) {
	recs := []dictlookup.LookupRecord{
		{Key: "+5561988880000", Payer: "11144477735", Status: 200, Result: dictlookup.LookupSent, OwnerName: "Maria, da Silva"},
		{Key: "a@b.com", Payer: "11144477735", Result: dictlookup.LookupBlocked, Reason: "empty", RetryAfterS: 1.25, Message: "refused"},
	}
	t.Run("CSV", func(t *testing.T) {
		var b bytes.Buffer
		w, err := dictlookup.NewLookupWriter(&b, false)
		require.NoError(t, err)
		require.Equal(t, strings.Join(dictlookup.LookupColumns, ",")+"\n", b.String(), "the header is written at once")
		for _, r := range recs {
			require.NoError(t, w.Write(r))
		}
		require.NoError(t, w.Close())
		require.Equal(t, strings.Join(dictlookup.LookupColumns, ",")+"\n"+
			`+5561988880000,11144477735,200,,0,sent,0,,,,,,,,,"Maria, da Silva",`+"\n"+
			`a@b.com,11144477735,0,empty,1.25,blocked,0,,,,,,,,,,refused`+"\n", b.String())
	})
	t.Run("JSON", func(t *testing.T) {
		var b bytes.Buffer
		w, err := dictlookup.NewLookupWriter(&b, true)
		require.NoError(t, err)
		for _, r := range recs {
			require.NoError(t, w.Write(r))
		}
		require.NoError(t, w.Close())
		var got []dictlookup.LookupRecord
		require.NoError(t, json.Unmarshal(b.Bytes(), &got), b.String())
		require.Equal(t, recs, got)
	})
	t.Run("EmptyJSONIsAnArray", func(t *testing.T) {
		var b bytes.Buffer
		w, err := dictlookup.NewLookupWriter(&b, true)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		var got []dictlookup.LookupRecord
		require.NoError(t, json.Unmarshal(b.Bytes(), &got))
		require.Empty(t, got)
	})
}
