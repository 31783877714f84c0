package web_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/dict"
)

var update = flag.Bool("update", false, "rewrite web/testdata/*.golden.xml (the test then fails: run it again without -update)")

// correlationSuffix is the random end of a CorrelationId (seed 001's layout:
// "B", the Brasília time to the millisecond, the ISPB, 6 hex digits).
var correlationSuffix = regexp.MustCompile(`(<CorrelationId>B[0-9]{17}[0-9]{8})[0-9A-F]{6}(</CorrelationId>)`)

// golden compares got with testdata/name, the CorrelationId's random
// suffix normalised to "XXXXXX" (ResponseTime comes from the fake clock).
func golden(t *testing.T, name, got string) {
	t.Helper()
	require.Regexp(t, `^(?s)<\?xml version="1.0" encoding="UTF-8" \?>\n`, got)
	normal := correlationSuffix.ReplaceAllString(got, "${1}XXXXXX${2}")
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(normal), 0o644))
		t.Fatalf("rewrote %s: run the test again without -update", path)
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, string(want), normal)
}

func requester(ispb string) reqOpt { return withHeader(dict.HeaderRequestingParticipant, ispb) }

func TestPoliciesEndpointsGolden(t *testing.T) {
	e := newEnv(t, withDict())
	// Some traffic: a lookup that found nothing (participant -3), 5 keys checks.
	require.Equal(t, http.StatusNotFound, e.lookup(keyMissing, payerPF).StatusCode)
	require.True(t, e.take(e.catalog.Key("KEYS_CHECK", participant), 5).Allowed)

	tests := []struct {
		name       string
		path       string
		opts       []reqOpt
		wantStatus int
		wantType   string
		golden     string
	}{
		{"List", "/policies/", []reqOpt{requester(participant)}, http.StatusOK, dict.ContentTypeXML, "policies_list.golden.xml"},
		{"Get", "/policies/" + dict.PolicyEntriesReadParticipantAntiscan, []reqOpt{requester(participant)}, http.StatusOK, dict.ContentTypeXML, "policy_get.golden.xml"},
		{"NoRequester", "/policies/", nil, http.StatusForbidden, dict.ContentTypeProblemXML, "problem_forbidden_malformed.golden.xml"},
		{"MalformedRequester", "/policies/", []reqOpt{requester("1234567X")}, http.StatusForbidden, dict.ContentTypeProblemXML, "problem_forbidden_malformed.golden.xml"},
		{"OtherParticipant", "/policies/" + "KEYS_CHECK", []reqOpt{requester("87654321")}, http.StatusForbidden, dict.ContentTypeProblemXML, "problem_forbidden_other.golden.xml"},
		{"UnknownPolicy", "/policies/NO_SUCH_POLICY", []reqOpt{requester(participant)}, http.StatusNotFound, dict.ContentTypeProblemXML, "problem_not_found.golden.xml"},
		{"UserPolicy", "/policies/" + dict.PolicyEntriesReadUserAntiscan, []reqOpt{requester(participant)}, http.StatusNotFound, dict.ContentTypeProblemXML, "problem_not_found_user.golden.xml"},
		{"HostileName", "/policies/%3Cscript%3E&amp;", []reqOpt{requester(participant)}, http.StatusNotFound, dict.ContentTypeProblemXML, "problem_not_found_hostile.golden.xml"},
		{"MethodNotAllowed", "/policies/", []reqOpt{requester(participant)}, http.StatusMethodNotAllowed, dict.ContentTypeProblemXML, "problem_method.golden.xml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := http.MethodGet
			if tt.name == "MethodNotAllowed" {
				method = http.MethodPost
			}
			resp := e.do(method, tt.path, nil, tt.opts...)
			require.Equal(t, tt.wantStatus, resp.StatusCode)
			require.Equal(t, tt.wantType, resp.Header.Get("Content-Type"))
			require.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
			golden(t, tt.golden, body(t, resp))
		})
	}

	// The endpoints read the mirror: nothing was taken, even from POLICIES_LIST.
	require.Equal(t, int64(20), e.tokens("POLICIES_LIST", participant))
	st, err := e.limiter.State(context.Background(), e.catalog.Key("POLICIES_LIST", participant))
	require.NoError(t, err)
	require.False(t, st.Stored)
}

func TestPoliciesEndpointsRoundTrip(t *testing.T) {
	e := newEnv(t, withDict())
	require.True(t, e.take(e.catalog.Key("CLAIMS_LIST_WITH_ROLE", participant), 7).Allowed)
	resp := e.get("/policies/", requester(participant))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list dict.ListPoliciesResponse
	require.NoError(t, dict.Decode(resp.Body, &list))
	require.Equal(t, "A", list.Category)
	require.Equal(t, e.clock.Now().UTC(), list.ResponseTime.Time)
	byName := map[string]dict.Policy{}
	for _, p := range list.Policies {
		byName[p.Name] = p
	}
	// Every PSP policy of the catalog, none of the USER ones.
	psp := 0
	for _, s := range e.catalog.Specs() {
		if s.Scope == dict.ScopePSP {
			psp++
		}
	}
	require.Len(t, list.Policies, psp)
	require.NotContains(t, byName, dict.PolicyEntriesReadUserAntiscan)
	require.Equal(t, dict.Policy{AvailableTokens: 193, Capacity: 200, RefillTokens: 40, RefillPeriodSec: 60, Name: "CLAIMS_LIST_WITH_ROLE"},
		byName["CLAIMS_LIST_WITH_ROLE"])
}

func TestPoliciesStoreUnavailable(t *testing.T) {
	e := newEnv(t, withFailingStore(), withDict())
	for _, path := range []string{"/policies/", "/policies/" + "KEYS_CHECK"} {
		resp := e.get(path, requester(participant))
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, path)
		require.Equal(t, "5", resp.Header.Get("Retry-After"))
		require.Equal(t, dict.ContentTypeProblemXML, resp.Header.Get("Content-Type"))
		golden(t, "problem_unavailable.golden.xml", body(t, resp))
	}
}

func TestPoliciesUnmatchedPathsAnswerXML(t *testing.T) {
	e := newEnv(t, withDict())
	resp := e.get("/policies/a/b", requester(participant))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, dict.ContentTypeProblemXML, resp.Header.Get("Content-Type"))
	p, err := dict.DecodeProblem([]byte(body(t, resp)))
	require.NoError(t, err)
	require.Equal(t, "NotFound", p.TypeName())
}

func TestPoliciesOffWithoutDict(t *testing.T) {
	e := newEnv(t)
	resp := e.get("/policies/", requester(participant))
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	require.Equal(t, dict.ContentTypeProblemXML, resp.Header.Get("Content-Type"))
}
