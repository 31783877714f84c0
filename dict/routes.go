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

// Operations of the public API (OpenAPI 1.8.0) and of the DICT manual that balde's
// client does not call itself; a PSP's own client is throttled by them
// through Transport.
const (
	opUpdateEntry                 = "updateEntry"
	opGetEntryInitiator           = "getEntryInitiator"
	opCreateClaim                 = "createClaim"
	opGetClaim                    = "getClaim"
	opAcknowledgeClaim            = "acknowledgeClaim"
	opConfirmClaim                = "confirmClaim"
	opCancelClaim                 = "cancelClaim"
	opCompleteClaim               = "completeClaim"
	opCreateSyncVerification      = "createSyncVerification"
	opCreateCidSetFile            = "createCidSetFile"
	opGetCidSetFile               = "getCidSetFile"
	opListCidSetEvents            = "listCidSetEvents"
	opGetEntryByCid               = "getEntryByCid"
	opCreateInfractionReport      = "createInfractionReport"
	opListInfractionReports       = "listInfractionReports"
	opGetInfractionReport         = "getInfractionReport"
	opAcknowledgeInfractionReport = "acknowledgeInfractionReport"
	opCancelInfractionReport      = "cancelInfractionReport"
	opCloseInfractionReport       = "closeInfractionReport"
	opCreateRefund                = "createRefund"
	opListRefunds                 = "listRefunds"
	opGetRefund                   = "getRefund"
	opCancelRefund                = "cancelRefund"
	opCloseRefund                 = "closeRefund"
	opGetPersonStatistics         = "getPersonStatistics"
	opCreateFraudMarker           = "createFraudMarker"
	opGetFraudMarker              = "getFraudMarker"
	opCancelFraudMarker           = "cancelFraudMarker"
	opListFrauds                  = "listFrauds"
)

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
		r(http.MethodPut, "/entries/{Key}", opUpdateEntry, true, policyEntriesUpdate),
		r(get, "/entries/{Key}/initiator", opGetEntryInitiator, false, antiscan...),
		r(post, "/entries/{Key}/delete", opDeleteEntry, true, policyEntriesWrite),
		r(get, "/entries/{Key}/statistics", opGetEntryStatistics, false, policyEntriesStatisticsRead),
		r(post, "/keys/check", opCheckKeys, false, PolicyKeysCheck),
		r(post, "/claims/", opCreateClaim, true, policyClaimsWrite),
		r(get, "/claims/", opListClaims, false, policyClaimsListWithRole, policyClaimsListWithoutRole),
		r(get, "/claims/{ClaimId}", opGetClaim, false, policyClaimsRead),
		r(post, "/claims/{ClaimId}/acknowledge", opAcknowledgeClaim, true, policyClaimsWrite),
		r(post, "/claims/{ClaimId}/confirm", opConfirmClaim, true, policyClaimsWrite),
		r(post, "/claims/{ClaimId}/cancel", opCancelClaim, true, policyClaimsWrite),
		r(post, "/claims/{ClaimId}/complete", opCompleteClaim, true, policyClaimsWrite),
		r(post, "/sync-verifications/", opCreateSyncVerification, true, policySyncVerificationsWrite),
		r(post, "/cids/files/", opCreateCidSetFile, true, policyCidsFilesWrite),
		r(get, "/cids/files/{Id}", opGetCidSetFile, false, policyCidsFilesRead),
		r(get, "/cids/events", opListCidSetEvents, false, policyCidsEventsList),
		r(get, "/cids/entries/{Cid}", opGetEntryByCid, false, policyCidsEntriesRead),
		r(post, "/infraction-reports/", opCreateInfractionReport, true, policyInfractionReportsWrite),
		r(get, "/infraction-reports/", opListInfractionReports, false, policyInfractionReportsListWithRole, policyInfractionReportsListNoRole),
		r(get, "/infraction-reports/{InfractionReportId}", opGetInfractionReport, false, policyInfractionReportsRead),
		r(post, "/infraction-reports/{InfractionReportId}/acknowledge", opAcknowledgeInfractionReport, true, policyInfractionReportsWrite),
		r(post, "/infraction-reports/{InfractionReportId}/cancel", opCancelInfractionReport, true, policyInfractionReportsWrite),
		r(post, "/infraction-reports/{InfractionReportId}/close", opCloseInfractionReport, true, policyInfractionReportsWrite),
		r(post, "/refunds/", opCreateRefund, true, policyRefundsWrite),
		r(get, "/refunds/", opListRefunds, false, policyRefundListWithRole, policyRefundListWithoutRole),
		r(get, "/refunds/{RefundId}", opGetRefund, false, policyRefundsRead),
		r(post, "/refunds/{RefundId}/cancel", opCancelRefund, true, policyRefundsWrite),
		r(post, "/refunds/{RefundId}/close", opCloseRefund, true, policyRefundsWrite),
		r(get, "/statistics/owner/{TaxIdNumber}", opGetPersonStatistics, false, policyPersonsStatisticsRead),
		r(post, "/fraud-markers/", opCreateFraudMarker, true, policyFraudMarkersWrite),
		r(get, "/fraud-markers/", opListFrauds, false, policyFraudMarkersList),
		r(get, "/fraud-markers/{Id}", opGetFraudMarker, false, policyFraudMarkersRead),
		r(post, "/fraud-markers/{Id}/cancel", opCancelFraudMarker, true, policyFraudMarkersWrite),
		r(get, "/policies/", OpListBucketStates, false, PolicyPoliciesList),
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
