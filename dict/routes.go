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
	OpUpdateEntry                 = "updateEntry"
	OpGetEntryInitiator           = "getEntryInitiator"
	OpCreateClaim                 = "createClaim"
	OpGetClaim                    = "getClaim"
	OpAcknowledgeClaim            = "acknowledgeClaim"
	OpConfirmClaim                = "confirmClaim"
	OpCancelClaim                 = "cancelClaim"
	OpCompleteClaim               = "completeClaim"
	OpCreateSyncVerification      = "createSyncVerification"
	OpCreateCidSetFile            = "createCidSetFile"
	OpGetCidSetFile               = "getCidSetFile"
	OpListCidSetEvents            = "listCidSetEvents"
	OpGetEntryByCid               = "getEntryByCid"
	OpCreateInfractionReport      = "createInfractionReport"
	OpListInfractionReports       = "listInfractionReports"
	OpGetInfractionReport         = "getInfractionReport"
	OpAcknowledgeInfractionReport = "acknowledgeInfractionReport"
	OpCancelInfractionReport      = "cancelInfractionReport"
	OpCloseInfractionReport       = "closeInfractionReport"
	OpCreateRefund                = "createRefund"
	OpListRefunds                 = "listRefunds"
	OpGetRefund                   = "getRefund"
	OpCancelRefund                = "cancelRefund"
	OpCloseRefund                 = "closeRefund"
	OpGetPersonStatistics         = "getPersonStatistics"
	OpCreateFraudMarker           = "createFraudMarker"
	OpGetFraudMarker              = "getFraudMarker"
	OpCancelFraudMarker           = "cancelFraudMarker"
	OpListFrauds                  = "listFrauds"
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
		r(post, "/entries/", OpCreateEntry, true, PolicyEntriesWrite),
		r(get, "/entries/{Key}", OpGetEntry, false, antiscan...),
		r(http.MethodPut, "/entries/{Key}", OpUpdateEntry, true, PolicyEntriesUpdate),
		r(get, "/entries/{Key}/initiator", OpGetEntryInitiator, false, antiscan...),
		r(post, "/entries/{Key}/delete", OpDeleteEntry, true, PolicyEntriesWrite),
		r(get, "/entries/{Key}/statistics", OpGetEntryStatistics, false, PolicyEntriesStatisticsRead),
		r(post, "/keys/check", OpCheckKeys, false, PolicyKeysCheck),
		r(post, "/claims/", OpCreateClaim, true, PolicyClaimsWrite),
		r(get, "/claims/", OpListClaims, false, PolicyClaimsListWithRole, PolicyClaimsListWithoutRole),
		r(get, "/claims/{ClaimId}", OpGetClaim, false, PolicyClaimsRead),
		r(post, "/claims/{ClaimId}/acknowledge", OpAcknowledgeClaim, true, PolicyClaimsWrite),
		r(post, "/claims/{ClaimId}/confirm", OpConfirmClaim, true, PolicyClaimsWrite),
		r(post, "/claims/{ClaimId}/cancel", OpCancelClaim, true, PolicyClaimsWrite),
		r(post, "/claims/{ClaimId}/complete", OpCompleteClaim, true, PolicyClaimsWrite),
		r(post, "/sync-verifications/", OpCreateSyncVerification, true, PolicySyncVerificationsWrite),
		r(post, "/cids/files/", OpCreateCidSetFile, true, PolicyCidsFilesWrite),
		r(get, "/cids/files/{Id}", OpGetCidSetFile, false, PolicyCidsFilesRead),
		r(get, "/cids/events", OpListCidSetEvents, false, PolicyCidsEventsList),
		r(get, "/cids/entries/{Cid}", OpGetEntryByCid, false, PolicyCidsEntriesRead),
		r(post, "/infraction-reports/", OpCreateInfractionReport, true, PolicyInfractionReportsWrite),
		r(get, "/infraction-reports/", OpListInfractionReports, false, PolicyInfractionReportsListWithRole, PolicyInfractionReportsListNoRole),
		r(get, "/infraction-reports/{InfractionReportId}", OpGetInfractionReport, false, PolicyInfractionReportsRead),
		r(post, "/infraction-reports/{InfractionReportId}/acknowledge", OpAcknowledgeInfractionReport, true, PolicyInfractionReportsWrite),
		r(post, "/infraction-reports/{InfractionReportId}/cancel", OpCancelInfractionReport, true, PolicyInfractionReportsWrite),
		r(post, "/infraction-reports/{InfractionReportId}/close", OpCloseInfractionReport, true, PolicyInfractionReportsWrite),
		r(post, "/refunds/", OpCreateRefund, true, PolicyRefundsWrite),
		r(get, "/refunds/", OpListRefunds, false, PolicyRefundListWithRole, PolicyRefundListWithoutRole),
		r(get, "/refunds/{RefundId}", OpGetRefund, false, PolicyRefundsRead),
		r(post, "/refunds/{RefundId}/cancel", OpCancelRefund, true, PolicyRefundsWrite),
		r(post, "/refunds/{RefundId}/close", OpCloseRefund, true, PolicyRefundsWrite),
		r(get, "/statistics/owner/{TaxIdNumber}", OpGetPersonStatistics, false, PolicyPersonsStatisticsRead),
		r(post, "/fraud-markers/", OpCreateFraudMarker, true, PolicyFraudMarkersWrite),
		r(get, "/fraud-markers/", OpListFrauds, false, PolicyFraudMarkersList),
		r(get, "/fraud-markers/{Id}", OpGetFraudMarker, false, PolicyFraudMarkersRead),
		r(post, "/fraud-markers/{Id}/cancel", OpCancelFraudMarker, true, PolicyFraudMarkersWrite),
		r(get, "/policies/", OpListBucketStates, false, PolicyPoliciesList),
		r(get, "/policies/{policy}", OpGetBucketState, false, PolicyPoliciesRead),
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

// RequestKeys returns the buckets a request on route rt is charged to, for
// participant: a getEntry (and getEntryInitiator) to the payer's USER
// anti-scan bucket for the key's type (payer from the PI-PayerId header)
// and to the participant's; a listing to the policy with role when the
// query filters by role (IsDonor, IsClaimer, IsDebited, IsCredited,
// ParticipantRole), without role otherwise; every other operation to its
// one PSP policy.
//
// Errors: ErrInvalidKey, ErrInvalidPayerID (bad input, nothing to charge).
func (c *Catalog) RequestKeys(rt Route, params map[string]string, header http.Header, query url.Values, participant string) ([]throttle.Key, error) {
	switch rt.Op {
	case OpGetEntry, OpGetEntryInitiator:
		key, err := ParseKey(params["Key"])
		if err != nil {
			return nil, err
		}
		payer := header.Get(HeaderPayerID)
		if _, err := ParsePayerID(payer); err != nil {
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
