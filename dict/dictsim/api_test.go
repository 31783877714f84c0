package dictsim_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/dict/dictsim"
)

// TestAPIAnswers sends each operation's requests straight to the
// simulator (no client validating first) and checks, step by step, the
// status, the problem (type and title) or document, the bucket charged and
// the count in the stats. Steps share the directory: a created key is there
// for the next step.
func TestAPIAnswers(t *testing.T) {
	const (
		ispb   = "12345678"
		payer  = "52998224725"
		newKey = "nova@example.com"
		// otherKey belongs to participant 87654321.
		otherKey = "11222333000181"
	)
	ctx := context.Background()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	srv, err := dictsim.NewServer(ctx, dictsim.Config{EntriesFile: "../testdata/entries.csv", FakeClock: true, Start: start,
		DB: "sqlite://" + filepath.Join(t.TempDir(), "sim.db"), Logger: quiet})
	require.NoError(t, err)
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		require.NoError(t, srv.Close())
	})
	e2e, err := dict.NewEndToEndID(ispb, start)
	require.NoError(t, err)

	marshal := func(v any) string {
		b, err := dict.Marshal(v)
		require.NoError(t, err)
		return string(b)
	}
	entry := func(key string, typ dict.KeyType, participant string) dict.Entry {
		return dict.Entry{Key: key, KeyType: typ,
			Account: dict.Account{Participant: participant, AccountNumber: "0001112223", AccountType: "CACC", OpeningDate: dict.Timestamp{Time: start}},
			Owner:   dict.Owner{Type: "NATURAL_PERSON", TaxIDNumber: payer, Name: "Fulana"}}
	}
	create := func(e dict.Entry) string {
		return marshal(&dict.CreateEntryRequest{Entry: e, Reason: "USER_REQUESTED"})
	}
	del := func(key string) string {
		return marshal(&dict.DeleteEntryRequest{Key: key, Participant: ispb, Reason: "USER_REQUESTED"})
	}
	check := func(keys ...string) string { return marshal(&dict.CheckKeysRequest{Keys: keys}) }

	steps := []struct {
		name, method, path, participant, body string
		op                                    string
		wantStatus                            int
		// wantProblem and wantTitle describe a problem answer; empty: a
		// document of the operation.
		wantProblem, wantTitle string
		// policy is the participant's bucket charged; wantCost what the
		// step cost it.
		policy   string
		wantCost int64
	}{
		{"CreateEntryBadParticipant", "POST", "/entries/", "1234", create(entry(newKey, dict.KeyEmail, ispb)),
			dict.OpCreateEntry, 400, dict.ProblemBadRequest, "Invalid PI-RequestingParticipant", dict.PolicyEntriesWrite, 0},
		{"CreateEntryMalformed", "POST", "/entries/", ispb, "<CreateEntryRequest>",
			dict.OpCreateEntry, 400, dict.ProblemBadRequest, "Bad Request", dict.PolicyEntriesWrite, 1},
		{"CreateEntryInvalidKey", "POST", "/entries/", ispb, create(entry(newKey, dict.KeyPhone, ispb)),
			dict.OpCreateEntry, 400, dict.ProblemEntryInvalid, "Bad Request", dict.PolicyEntriesWrite, 1},
		{"CreateEntryOtherAccount", "POST", "/entries/", ispb, create(entry(newKey, dict.KeyEmail, "87654321")),
			dict.OpCreateEntry, 403, dict.ProblemForbidden, "Forbidden", dict.PolicyEntriesWrite, 1},
		{"CreateEntry", "POST", "/entries/", ispb, create(entry(newKey, dict.KeyEmail, ispb)),
			dict.OpCreateEntry, 201, "", "", dict.PolicyEntriesWrite, 1},
		{"CreateEntryExists", "POST", "/entries/", ispb, create(entry(newKey, dict.KeyEmail, ispb)),
			dict.OpCreateEntry, 409, dict.ProblemEntryAlreadyExists, "Conflict", dict.PolicyEntriesWrite, 1},

		{"GetEntry", "GET", "/entries/" + newKey, ispb, "",
			dict.OpGetEntry, 200, "", "", dict.PolicyEntriesReadParticipantAntiscan, 1},

		{"DeleteEntryMalformed", "POST", "/entries/" + newKey + "/delete", ispb, "nope",
			dict.OpDeleteEntry, 400, dict.ProblemBadRequest, "Bad Request", dict.PolicyEntriesWrite, 1},
		{"DeleteEntryOtherPath", "POST", "/entries/" + otherKey + "/delete", ispb, del(newKey),
			dict.OpDeleteEntry, 400, dict.ProblemBadRequest, "Bad Request", dict.PolicyEntriesWrite, 1},
		{"DeleteEntryOtherParticipant", "POST", "/entries/" + otherKey + "/delete", ispb, del(otherKey),
			dict.OpDeleteEntry, 403, dict.ProblemForbidden, "Forbidden", dict.PolicyEntriesWrite, 1},
		{"DeleteEntry", "POST", "/entries/" + newKey + "/delete", ispb, del(newKey),
			dict.OpDeleteEntry, 200, "", "", dict.PolicyEntriesWrite, 1},
		{"DeleteEntryNotFound", "POST", "/entries/" + newKey + "/delete", ispb, del(newKey),
			dict.OpDeleteEntry, 404, dict.ProblemEntryNotFound, "Not Found", dict.PolicyEntriesWrite, 1},

		{"GetEntryNotFound", "GET", "/entries/" + newKey, ispb, "",
			dict.OpGetEntry, 404, dict.ProblemEntryNotFound, "Entry not found", dict.PolicyEntriesReadParticipantAntiscan, 3},

		{"CheckKeysNone", "POST", "/keys/check", ispb, check(),
			dict.OpCheckKeys, 400, dict.ProblemBadRequest, "Bad request", dict.PolicyKeysCheck, 1},
		{"CheckKeysBadKey", "POST", "/keys/check", ispb, check(newKey, "not a key"),
			dict.OpCheckKeys, 400, dict.ProblemBadRequest, "Bad request", dict.PolicyKeysCheck, 1},
		{"CheckKeys", "POST", "/keys/check", ispb, check(newKey, otherKey),
			dict.OpCheckKeys, 200, "", "", dict.PolicyKeysCheck, 1},

		{"ListClaimsWithRole", "GET", "/claims/?IsDonor=true", ispb, "",
			dict.OpListClaims, 200, "", "", dict.PolicyClaimsListWithRole, 1},
		{"ListClaimsWithoutRole", "GET", "/claims/", ispb, "",
			dict.OpListClaims, 200, "", "", dict.PolicyClaimsListWithoutRole, 1},

		{"GetPolicyUnknown", "GET", "/policies/NO_SUCH_POLICY", ispb, "",
			dict.OpGetBucketState, 404, dict.ProblemNotFound, "Policy not found", dict.PolicyPoliciesRead, 1},
		{"GetPolicy", "GET", "/policies/KEYS_CHECK", ispb, "",
			dict.OpGetBucketState, 200, "", "", dict.PolicyPoliciesRead, 1},
		{"ListPoliciesBadParticipant", "GET", "/policies/", "x", "",
			dict.OpListBucketStates, 403, dict.ProblemForbidden, "Invalid PI-RequestingParticipant", dict.PolicyPoliciesList, 0},
		{"ListPolicies", "GET", "/policies/", ispb, "",
			dict.OpListBucketStates, 200, "", "", dict.PolicyPoliciesList, 1},
	}
	for i, st := range steps {
		key := srv.Catalog().Key(st.policy, ispb)
		before, err := srv.Limiter().State(ctx, key)
		require.NoError(t, err)
		count := srv.Stats().Count(st.op, st.wantStatus)

		req, err := http.NewRequest(st.method, hs.URL+dict.APIPrefix+st.path, bytes.NewBufferString(st.body))
		require.NoError(t, err)
		req.Header.Set(dict.HeaderRequestingParticipant, st.participant)
		req.Header.Set(dict.HeaderPayerID, payer)
		req.Header.Set(dict.HeaderEndToEndID, e2e)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var body bytes.Buffer
		_, err = body.ReadFrom(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()

		require.Equal(t, st.wantStatus, resp.StatusCode, "step %d %s: %s", i, st.name, body.String())
		if st.wantProblem != "" {
			require.Equal(t, dict.ContentTypeProblemXML, resp.Header.Get("Content-Type"), "step %d %s", i, st.name)
			p, err := dict.DecodeProblem(body.Bytes())
			require.NoError(t, err, "step %d %s", i, st.name)
			require.Equal(t, st.wantProblem, p.TypeName(), "step %d %s", i, st.name)
			require.Equal(t, st.wantTitle, p.Title, "step %d %s", i, st.name)
			require.Equal(t, st.wantStatus, p.Status, "step %d %s", i, st.name)
		} else {
			require.Equal(t, dict.ContentTypeXML, resp.Header.Get("Content-Type"), "step %d %s", i, st.name)
			require.Contains(t, body.String(), "<ResponseTime>"+dict.FormatTimestamp(start)+"</ResponseTime>", "step %d %s", i, st.name)
			require.Contains(t, body.String(), "<CorrelationId>B20260102000405000"+ispb, "step %d %s", i, st.name)
		}
		after, err := srv.Limiter().State(ctx, key)
		require.NoError(t, err)
		require.Equal(t, st.wantCost, before.Tokens-after.Tokens, "step %d %s: tokens of %s", i, st.name, st.policy)
		require.Equal(t, count+1, srv.Stats().Count(st.op, st.wantStatus), "step %d %s: stats", i, st.name)
	}
}
