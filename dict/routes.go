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
// the policies it is charged to. Policies lists every policy the operation
// may be charged to; which ones a request is charged to is decided by
// Catalog.RequestKeys (a getEntry: the payer's USER policy for the key's
// type and the participant's; a listing: with or without role).
type Route struct {
	Method string
	// Path is the path after the API prefix (/api/v2), with {Param}
	// segments, as in the OpenAPI description.
	Path     string
	Op       string
	Policies []string
	// Write is set for the operations whose body the PSP must sign (XMLDSig).
	Write bool
}

// opGetEntryInitiator is getEntry's twin charged the same way.
const opGetEntryInitiator = "getEntryInitiator"

// Routes returns the DICT API's operations, method + path → operation →
// policies: every operation of the public API (OpenAPI 1.8.0) and of the
// DICT manual's policy table. The paths of getEntryStatistics and of the fraud
// markers are not in the 1.8.0 reference; they follow the API's naming.
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

// apiPrefix matches the API prefix of a DICT URL path: /api/v2, /api/v1 on
// the rate-limit host of the public spec, or /api-np/v1 where OpenAPI
// 1.8.0 serves checkKeys (dict-np…), after any base path of a proxy.
var apiPrefix = regexp.MustCompile(`^.*?/api(?:-np)?/v[0-9]+`)

// MatchRoute returns the route of a request to the DICT: method and URL
// path (with or without its /api/vN or /api-np/vN prefix), and the values of the path's
// {Param} segments. ok is false for a request that is no DICT operation.
func MatchRoute(method, path string) (rt Route, params map[string]string, ok bool) {
	path = apiPrefix.ReplaceAllString(path, "")
	segs := strings.Split(path, "/")
	for _, r := range Routes() {
		if r.Method != method {
			continue
		}
		want := strings.Split(r.Path, "/")
		if len(want) != len(segs) {
			continue
		}
		p := map[string]string{}
		match := true
		for i, w := range want {
			if strings.HasPrefix(w, "{") {
				if segs[i] == "" {
					match = false
					break
				}
				v, err := url.PathUnescape(segs[i])
				if err != nil {
					match = false
					break
				}
				p[strings.Trim(w, "{}")] = v
			} else if w != segs[i] {
				match = false
				break
			}
		}
		if match {
			return r, p, true
		}
	}
	return Route{}, nil, false
}

// requestKeys returns the buckets a request on route rt is charged to, for
// participant: a getEntry (and getEntryInitiator) to the payer's USER
// anti-scan bucket for the key's type (payer from the PI-PayerId header)
// and to the participant's; a listing to the policy with role when the
// query filters by role (IsDonor, IsClaimer, IsDebited, IsCredited,
// ParticipantRole), without role otherwise; every other operation to its
// one PSP policy.
//
// Errors: ErrInvalidKey, ErrInvalidPayerID (bad input, nothing to charge).
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
		role := false
		for _, name := range []string{"IsDonor", "IsClaimer", "IsDebited", "IsCredited"} {
			role = role || query.Get(name) == "true"
		}
		role = role || query.Get("ParticipantRole") != ""
		if !role {
			policy = rt.Policies[1]
		}
	}
	return []throttle.Key{c.Key(policy, participant)}, nil
}
