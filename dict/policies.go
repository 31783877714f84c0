package dict

import (
	"maps"
	"time"
)

// Policy names of the DICT (the DICT manual's table, in its order).
const (
	PolicyEntriesReadUserAntiscan        = "ENTRIES_READ_USER_ANTISCAN"
	PolicyEntriesReadUserAntiscanV2      = "ENTRIES_READ_USER_ANTISCAN_V2"
	PolicyEntriesReadParticipantAntiscan = "ENTRIES_READ_PARTICIPANT_ANTISCAN"
	policyEntriesStatisticsRead          = "ENTRIES_STATISTICS_READ"
	policyEntriesWrite                   = "ENTRIES_WRITE"
	policyEntriesUpdate                  = "ENTRIES_UPDATE"
	policyClaimsRead                     = "CLAIMS_READ"
	policyClaimsWrite                    = "CLAIMS_WRITE"
	policyClaimsListWithRole             = "CLAIMS_LIST_WITH_ROLE"
	policyClaimsListWithoutRole          = "CLAIMS_LIST_WITHOUT_ROLE"
	policySyncVerificationsWrite         = "SYNC_VERIFICATIONS_WRITE"
	policyCidsFilesWrite                 = "CIDS_FILES_WRITE"
	policyCidsFilesRead                  = "CIDS_FILES_READ"
	policyCidsEventsList                 = "CIDS_EVENTS_LIST"
	policyCidsEntriesRead                = "CIDS_ENTRIES_READ"
	policyInfractionReportsRead          = "INFRACTION_REPORTS_READ"
	policyInfractionReportsWrite         = "INFRACTION_REPORTS_WRITE"
	policyInfractionReportsListWithRole  = "INFRACTION_REPORTS_LIST_WITH_ROLE"
	policyInfractionReportsListNoRole    = "INFRACTION_REPORTS_LIST_WITHOUT_ROLE"
	policyKeysCheck                      = "KEYS_CHECK"
	policyRefundsRead                    = "REFUNDS_READ"
	policyRefundsWrite                   = "REFUNDS_WRITE"
	policyRefundListWithRole             = "REFUND_LIST_WITH_ROLE"
	policyRefundListWithoutRole          = "REFUND_LIST_WITHOUT_ROLE"
	policyFraudMarkersRead               = "FRAUD_MARKERS_READ"
	policyFraudMarkersWrite              = "FRAUD_MARKERS_WRITE"
	policyFraudMarkersList               = "FRAUD_MARKERS_LIST"
	policyPersonsStatisticsRead          = "PERSONS_STATISTICS_READ"
	policyPoliciesRead                   = "POLICIES_READ"
	policyPoliciesList                   = "POLICIES_LIST"
)

// Categories are the participant categories of the DICT manual, A (largest) to H.
var Categories = []string{"A", "B", "C", "D", "E", "F", "G", "H"}

// seedPolicies returns the DICT's policy table (the DICT manual v8 and API
// 2.6.1) exactly. A 500 and a 429 cost nothing (the DICT did not serve the
// request), any other status 1, but for the anti-scan policies' 404 (20 to
// the payer, 3 to the participant).
func seedPolicies() []Spec {
	perMin := func(n, capacity int64) limits {
		return limits{Capacity: capacity, RefillTokens: n, RefillPeriod: time.Minute}
	}
	categories := map[string]limits{
		"A": perMin(25000, 50000),
		"B": perMin(20000, 40000),
		"C": perMin(15000, 30000),
		"D": perMin(8000, 16000),
		"E": perMin(2500, 5000),
		"F": perMin(250, 500),
		"G": perMin(25, 250),
		"H": perMin(2, 50),
	}
	user := func() map[string]limits {
		pf, pj := perMin(2, 100), perMin(20, 1000)
		pf.Credits, pj.Credits = map[string]int64{EventPayment: 1}, map[string]int64{EventPayment: 2}
		return map[string]limits{string(personPF): pf, string(personPJ): pj}
	}
	userCosts := func() map[string]int64 {
		return map[string]int64{"200": 1, "404": 20, "500": 0, "429": 0, outcomeDefault: 1}
	}
	other := func() map[string]int64 {
		return map[string]int64{"500": 0, "429": 0, outcomeDefault: 1}
	}
	psp := func(name string, l limits, ops ...string) Spec {
		return Spec{Name: name, Scope: ScopePSP, Operations: ops, Limits: l, Reserve: 1, Costs: other()}
	}
	return []Spec{
		{Name: PolicyEntriesReadUserAntiscan, Scope: ScopeUser, Operations: []string{OpGetEntry},
			Classes: user(), Reserve: 1, Costs: userCosts()},
		{Name: PolicyEntriesReadUserAntiscanV2, Scope: ScopeUser, Operations: []string{OpGetEntry},
			Classes: user(), Reserve: 1, Costs: userCosts()},
		{Name: PolicyEntriesReadParticipantAntiscan, Scope: ScopePSP, Operations: []string{OpGetEntry},
			Classes: categories, Reserve: 1,
			Costs:   map[string]int64{"200": 1, "404": 3, "500": 0, "429": 0, outcomeDefault: 1},
			Credits: map[string]int64{EventPayment: 1}},
		{Name: policyEntriesStatisticsRead, Scope: ScopePSP, Operations: []string{opGetEntryStatistics},
			Classes: maps.Clone(categories), Reserve: 1, Costs: other()},
		psp(policyEntriesWrite, perMin(1200, 36000), opCreateEntry, opDeleteEntry),
		psp(policyEntriesUpdate, perMin(600, 600), "updateEntry"),
		psp(policyClaimsRead, perMin(600, 18000), "getClaim"),
		psp(policyClaimsWrite, perMin(1200, 36000), "createClaim", "acknowledgeClaim", "cancelClaim", "confirmClaim", "completeClaim"),
		psp(policyClaimsListWithRole, perMin(40, 200), opListClaims),
		psp(policyClaimsListWithoutRole, perMin(10, 50), opListClaims),
		psp(policySyncVerificationsWrite, perMin(10, 50), "createSyncVerification"),
		psp(policyCidsFilesWrite, limits{Capacity: 200, RefillTokens: 40, RefillPeriod: 24 * time.Hour}, "createCidSetFile"),
		psp(policyCidsFilesRead, perMin(10, 50), "getCidSetFile"),
		psp(policyCidsEventsList, perMin(20, 100), "listCidSetEvents"),
		psp(policyCidsEntriesRead, perMin(1200, 36000), "getEntryByCid"),
		psp(policyInfractionReportsRead, perMin(600, 18000), "getInfractionReport"),
		psp(policyInfractionReportsWrite, perMin(1200, 36000), "createInfractionReport", "acknowledgeInfractionReport", "cancelInfractionReport", "closeInfractionReport"),
		psp(policyInfractionReportsListWithRole, perMin(40, 200), "listInfractionReports"),
		psp(policyInfractionReportsListNoRole, perMin(10, 50), "listInfractionReports"),
		psp(policyKeysCheck, perMin(70, 70), opCheckKeys),
		psp(policyRefundsRead, perMin(1200, 36000), "getRefund"),
		psp(policyRefundsWrite, perMin(2400, 72000), "createRefund", "cancelRefund", "closeRefund"),
		psp(policyRefundListWithRole, perMin(40, 200), "listRefunds"),
		psp(policyRefundListWithoutRole, perMin(10, 50), "listRefunds"),
		psp(policyFraudMarkersRead, perMin(600, 18000), "getFraudMarker"),
		psp(policyFraudMarkersWrite, perMin(1200, 36000), "createFraudMarker", "cancelFraudMarker"),
		psp(policyFraudMarkersList, perMin(600, 18000), "listFrauds"),
		psp(policyPersonsStatisticsRead, perMin(12000, 36000), "getPersonStatistics"),
		psp(policyPoliciesRead, perMin(60, 200), opGetBucketState),
		psp(policyPoliciesList, perMin(6, 20), OpListBucketStates),
	}
}

// userPolicyFor returns the USER anti-scan policy of a lookup of a key of
// type t: the _V2 one for CPF, CNPJ and EVP keys.
func userPolicyFor(t KeyType) string {
	if t == KeyEmail || t == KeyPhone {
		return PolicyEntriesReadUserAntiscan
	}
	return PolicyEntriesReadUserAntiscanV2
}
