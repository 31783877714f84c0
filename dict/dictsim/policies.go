package dictsim

import "time"

// The DICT's rate limits and counting rules, written from the DICT manual,
// chapter 19 (buckets and the API's policy table), independently of balde's
// client, so that a mistake in the client's catalog cannot hide here.

// limit is the size and refill of a bucket: refill tokens every period, up
// to capacity.
type limit struct {
	capacity, refill int64
	period           time.Duration
}

func perMin(refill, capacity int64) limit {
	return limit{capacity: capacity, refill: refill, period: time.Minute}
}

// policy is one row of the policy table. A USER policy has one bucket per
// end user (PI-PayerId), sized by person type (PF: 11 digits, PJ: 14); a PSP
// policy one bucket per participant, sized by the participant's category
// when byCategory is set.
type policy struct {
	name             string
	user, byCategory bool
	limit            limit
}

// The policies the simulator enforces.
const (
	userAntiscan        = "ENTRIES_READ_USER_ANTISCAN"
	userAntiscanV2      = "ENTRIES_READ_USER_ANTISCAN_V2"
	participantAntiscan = "ENTRIES_READ_PARTICIPANT_ANTISCAN"
	statisticsRead      = "ENTRIES_STATISTICS_READ"
	entriesWrite        = "ENTRIES_WRITE"
	claimsListWithRole  = "CLAIMS_LIST_WITH_ROLE"
	claimsListNoRole    = "CLAIMS_LIST_WITHOUT_ROLE"
	keysCheck           = "KEYS_CHECK"
	policiesRead        = "POLICIES_READ"
	policiesList        = "POLICIES_LIST"
)

// userLimits are the USER anti-scan buckets by person type.
func userLimits(pj bool) limit {
	if pj {
		return perMin(20, 1000)
	}
	return perMin(2, 100)
}

// categoryLimits are ENTRIES_READ_PARTICIPANT_ANTISCAN's (and
// ENTRIES_STATISTICS_READ's) buckets by participant category, A..H.
var categoryLimits = map[string]limit{
	"A": perMin(25000, 50000),
	"B": perMin(20000, 40000),
	"C": perMin(15000, 30000),
	"D": perMin(8000, 16000),
	"E": perMin(2500, 5000),
	"F": perMin(250, 500),
	"G": perMin(25, 250),
	"H": perMin(2, 50),
}

// policyTable is the DICT manual's table, in its order.
var policyTable = []policy{
	{name: userAntiscan, user: true},
	{name: userAntiscanV2, user: true},
	{name: participantAntiscan, byCategory: true},
	{name: statisticsRead, byCategory: true},
	{name: entriesWrite, limit: perMin(1200, 36000)},
	{name: "ENTRIES_UPDATE", limit: perMin(600, 600)},
	{name: "CLAIMS_READ", limit: perMin(600, 18000)},
	{name: "CLAIMS_WRITE", limit: perMin(1200, 36000)},
	{name: claimsListWithRole, limit: perMin(40, 200)},
	{name: claimsListNoRole, limit: perMin(10, 50)},
	{name: "SYNC_VERIFICATIONS_WRITE", limit: perMin(10, 50)},
	{name: "CIDS_FILES_WRITE", limit: limit{capacity: 200, refill: 40, period: 24 * time.Hour}},
	{name: "CIDS_FILES_READ", limit: perMin(10, 50)},
	{name: "CIDS_EVENTS_LIST", limit: perMin(20, 100)},
	{name: "CIDS_ENTRIES_READ", limit: perMin(1200, 36000)},
	{name: "INFRACTION_REPORTS_READ", limit: perMin(600, 18000)},
	{name: "INFRACTION_REPORTS_WRITE", limit: perMin(1200, 36000)},
	{name: "INFRACTION_REPORTS_LIST_WITH_ROLE", limit: perMin(40, 200)},
	{name: "INFRACTION_REPORTS_LIST_WITHOUT_ROLE", limit: perMin(10, 50)},
	{name: keysCheck, limit: perMin(70, 70)},
	{name: "REFUNDS_READ", limit: perMin(1200, 36000)},
	{name: "REFUNDS_WRITE", limit: perMin(2400, 72000)},
	{name: "REFUND_LIST_WITH_ROLE", limit: perMin(40, 200)},
	{name: "REFUND_LIST_WITHOUT_ROLE", limit: perMin(10, 50)},
	{name: "FRAUD_MARKERS_READ", limit: perMin(600, 18000)},
	{name: "FRAUD_MARKERS_WRITE", limit: perMin(1200, 36000)},
	{name: "FRAUD_MARKERS_LIST", limit: perMin(600, 18000)},
	{name: "PERSONS_STATISTICS_READ", limit: perMin(12000, 36000)},
	{name: policiesRead, limit: perMin(60, 200)},
	{name: policiesList, limit: perMin(6, 20)},
}

// cost is what an answer with status costs a bucket of policy (the DICT manual's
// counting rules): the anti-scan policies count 200 and 404 only (USER: 1
// and 20; participant: 1 and 3); every other policy counts any status but
// 500 as 1.
func cost(policy string, status int) int64 {
	switch policy {
	case userAntiscan, userAntiscanV2:
		return map[int]int64{200: 1, 404: 20}[status]
	case participantAntiscan:
		return map[int]int64{200: 1, 404: 3}[status]
	}
	if status == 500 {
		return 0
	}
	return 1
}

// paymentCredit is what a payment order sent after a lookup gives back to
// a bucket of policy: 1 to a PF payer, 2 to a PJ payer, 1 to the
// participant.
func paymentCredit(policy string, pj bool) int64 {
	if pj && policy != participantAntiscan {
		return 2
	}
	return 1
}
