package dict

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/balde-throttle/balde/throttle"
)

// Route is one operation of the DICT API: the request that calls it and
// every policy it may be charged to (Catalog.requestKeys picks a request's).
type Route struct {
	Method   string
	Path     string // after the API prefix, with {Param} segments as in the OpenAPI description
	Op       string
	Policies []string
	Write    bool // the PSP must sign the body (XMLDSig)
}

// opGetEntryInitiator is getEntry's twin charged the same way.
const opGetEntryInitiator = "getEntryInitiator"

// Routes returns every operation of the public DICT API (OpenAPI 1.8.0) and
// of the DICT manual's policy table; the paths of getEntryStatistics and the
// fraud markers, missing from the 1.8.0 reference, follow the API's naming.
func Routes() []Route {
	get, post := http.MethodGet, http.MethodPost
	r := func(method, path, op string, write bool, policies ...string) Route {
		return Route{Method: method, Path: path, Op: op, Policies: policies, Write: write}
	}
	antiscan := []string{PolicyEntriesReadUserAntiscan, PolicyEntriesReadUserAntiscanV2, PolicyEntriesReadParticipantAntiscan}
	return []Route{
		r(post, "/entries/", opCreateEntry, true, policyEntriesWrite),
		r(get, "/entries/{Key}", OpGetEntry, false, antiscan...),
		r(http.MethodPut, "/entries/{Key}", "updateEntry", true, policyEntriesUpdate),
		r(get, "/entries/{Key}/initiator", opGetEntryInitiator, false, antiscan...),
		r(post, "/entries/{Key}/delete", opDeleteEntry, true, policyEntriesWrite),
		r(get, "/entries/{Key}/statistics", opGetEntryStatistics, false, policyEntriesStatisticsRead),
		r(post, "/keys/check", opCheckKeys, false, policyKeysCheck),
		r(post, "/claims/", "createClaim", true, policyClaimsWrite),
		r(get, "/claims/", opListClaims, false, policyClaimsListWithRole, policyClaimsListWithoutRole),
		r(get, "/claims/{ClaimId}", "getClaim", false, policyClaimsRead),
		r(post, "/claims/{ClaimId}/acknowledge", "acknowledgeClaim", true, policyClaimsWrite),
		r(post, "/claims/{ClaimId}/confirm", "confirmClaim", true, policyClaimsWrite),
		r(post, "/claims/{ClaimId}/cancel", "cancelClaim", true, policyClaimsWrite),
		r(post, "/claims/{ClaimId}/complete", "completeClaim", true, policyClaimsWrite),
		r(post, "/sync-verifications/", "createSyncVerification", true, policySyncVerificationsWrite),
		r(post, "/cids/files/", "createCidSetFile", true, policyCidsFilesWrite),
		r(get, "/cids/files/{Id}", "getCidSetFile", false, policyCidsFilesRead),
		r(get, "/cids/events", "listCidSetEvents", false, policyCidsEventsList),
		r(get, "/cids/entries/{Cid}", "getEntryByCid", false, policyCidsEntriesRead),
		r(post, "/infraction-reports/", "createInfractionReport", true, policyInfractionReportsWrite),
		r(get, "/infraction-reports/", "listInfractionReports", false, policyInfractionReportsListWithRole, policyInfractionReportsListNoRole),
		r(get, "/infraction-reports/{InfractionReportId}", "getInfractionReport", false, policyInfractionReportsRead),
		r(post, "/infraction-reports/{InfractionReportId}/acknowledge", "acknowledgeInfractionReport", true, policyInfractionReportsWrite),
		r(post, "/infraction-reports/{InfractionReportId}/cancel", "cancelInfractionReport", true, policyInfractionReportsWrite),
		r(post, "/infraction-reports/{InfractionReportId}/close", "closeInfractionReport", true, policyInfractionReportsWrite),
		r(post, "/refunds/", "createRefund", true, policyRefundsWrite),
		r(get, "/refunds/", "listRefunds", false, policyRefundListWithRole, policyRefundListWithoutRole),
		r(get, "/refunds/{RefundId}", "getRefund", false, policyRefundsRead),
		r(post, "/refunds/{RefundId}/cancel", "cancelRefund", true, policyRefundsWrite),
		r(post, "/refunds/{RefundId}/close", "closeRefund", true, policyRefundsWrite),
		r(get, "/statistics/owner/{TaxIdNumber}", "getPersonStatistics", false, policyPersonsStatisticsRead),
		r(post, "/fraud-markers/", "createFraudMarker", true, policyFraudMarkersWrite),
		r(get, "/fraud-markers/", "listFrauds", false, policyFraudMarkersList),
		r(get, "/fraud-markers/{Id}", "getFraudMarker", false, policyFraudMarkersRead),
		r(post, "/fraud-markers/{Id}/cancel", "cancelFraudMarker", true, policyFraudMarkersWrite),
		r(get, "/policies/", OpListBucketStates, false, policyPoliciesList),
		r(get, "/policies/{policy}", opGetBucketState, false, policyPoliciesRead),
	}
}

// apiPrefix matches the API prefix of a DICT URL path (/api/v2, /api/v1 on
// the rate-limit host, /api-np/v1 for checkKeys), after any proxy's base path.
var apiPrefix = regexp.MustCompile(`^.*?/api(?:-np)?/v[0-9]+`)

// MatchRoute returns the route of a request to the DICT (its URL path with
// or without the API prefix) and the values of the path's {Param} segments.
// ok is false for a request that is no DICT operation.
func MatchRoute(method, path string) (rt Route, params map[string]string, ok bool) {
	segs := strings.Split(apiPrefix.ReplaceAllString(path, ""), "/")
next:
	for _, r := range Routes() {
		want := strings.Split(r.Path, "/")
		if r.Method != method || len(want) != len(segs) {
			continue
		}
		p := map[string]string{}
		for i, w := range want {
			v, err := url.PathUnescape(segs[i])
			switch {
			case !strings.HasPrefix(w, "{"):
				if w != segs[i] {
					continue next
				}
			case segs[i] == "" || err != nil:
				continue next
			default:
				p[strings.Trim(w, "{}")] = v
			}
		}
		return r, p, true
	}
	return Route{}, nil, false
}

// requestKeys returns the buckets a request on rt is charged to: a getEntry
// (or getEntryInitiator) to LookupKeys (the payer from PI-PayerId); a listing
// to the policy with role when the query filters by role, without otherwise;
// any other operation to its one policy. Errors: ErrInvalidKey, ErrInvalidPayerID.
func (c *Catalog) requestKeys(rt Route, params map[string]string, header http.Header, query url.Values, participant string) ([]throttle.Key, error) {
	switch rt.Op {
	case OpGetEntry, opGetEntryInitiator:
		key, err := ParseKey(params["Key"])
		if err != nil {
			return nil, err
		}
		payer := header.Get(HeaderPayerID)
		if _, err := parsePayerID(payer); err != nil {
			return nil, fmt.Errorf("%s: %w", HeaderPayerID, err)
		}
		return c.LookupKeys(key.Type, payer, participant), nil
	}
	policy := rt.Policies[0]
	if len(rt.Policies) == 2 {
		role := query.Get("ParticipantRole") != ""
		for _, name := range []string{"IsDonor", "IsClaimer", "IsDebited", "IsCredited"} {
			role = role || query.Get(name) == "true"
		}
		if !role {
			policy = rt.Policies[1]
		}
	}
	return []throttle.Key{c.Key(policy, participant)}, nil
}
