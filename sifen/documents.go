package sifen

import (
	"cmp"
	"slices"
	"time"
)

// Status is where a document stands.
type Status string

const (
	// StatusDraft: imported, never sent, or known not to be at SIFEN.
	StatusDraft Status = "draft"
	// StatusSending: claimed by a send that has not recorded SIFEN's answer
	// (or crashed: see Sender.Resolve).
	StatusSending Status = "sending"
	// StatusSent: in a lot SIFEN queued (0300); no final result yet.
	StatusSent Status = "sent"
	// StatusApproved and StatusRejected are SIFEN's final results.
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
	// StatusError: the last send did not reach SIFEN, was not queued (0301), or
	// the throttle failed; Message says which. It may be sent again.
	StatusError Status = "error"
)

// Sendable reports whether a document in status s may be claimed by a send.
func (s Status) Sendable() bool { return s == StatusDraft || s == StatusError }

// Final reports whether s is SIFEN's final result.
func (s Status) Final() bool { return s == StatusApproved || s == StatusRejected }

// Document is a DE kept in the database with its sending state.
type Document struct {
	ID   int64
	Env  Env
	RUC  RUC
	CDC  string
	Type int
	// XML is the rDE element. List leaves it empty; Get fills it.
	XML     []byte
	Status  Status
	Message string
	// Claim is the token of the send holding a sending document; LotHash the
	// identity of its last send's lot (packedLot.Hash), LotNumber SIFEN's
	// number of it once queued; ResponseCode SIFEN's last code about it.
	Claim        string
	LotHash      string
	LotNumber    string
	ResponseCode string
	// Result is SIFEN's dEstRes once known and AuthNumber the dProtAut;
	// RetryAt, after a throttle refusal, the earliest a send would be admitted;
	// Version is bumped by every change.
	Result, AuthNumber                      string
	RetryAt                                 time.Time
	Version                                 int64
	CreatedAt, UpdatedAt, ClaimedAt, SentAt time.Time
}

// Filter selects documents for List. Empty fields match everything.
type Filter struct {
	Env       Env
	RUC       string // the number, without check digit
	Statuses  []Status
	LotNumber string
	// CDCs, when set, keeps the documents holding one of them; BeforeID is the
	// keyset cursor (smaller ids; 0 starts from the newest); Limit defaults to
	// 100, at most 1000.
	CDCs     []string
	BeforeID int64
	Limit    int
}

// CheckReimport is nil when a DE may be imported under the CDC of the
// stored document d (with its XML): d in draft or error and de the same XML,
// or other XML with replace; or d rejected and de corrected (other XML).
// Otherwise it is the refusal at now, a *CDCError.
func CheckReimport(d Document, de DE, replace bool, now time.Time) error {
	same := string(d.XML) == string(de.XML)
	if (d.Status.Sendable() && (same || replace)) || (d.Status == StatusRejected && !same) {
		return nil
	}
	d.XML = nil
	return &CDCError{CDC: de.CDC, Document: d, Now: now, OtherContent: !same}
}

// GroupLots splits the sendable documents into lots SIFEN accepts by count
// and kind: one environment, RUC and DE type, at most maxLotDEs, in id order,
// lots ordered by first document. A lot may still be too big: SendDocuments
// then sends its longest prefix that fits (FitLot) and the rest after.
func GroupLots(docs []Document) [][]int64 {
	type kind struct {
		env Env
		ruc string
		typ int
	}
	sorted := slices.Clone(docs)
	slices.SortFunc(sorted, func(a, b Document) int { return cmp.Compare(a.ID, b.ID) })
	var lots [][]int64
	open := make(map[kind]int) // the index in lots of each kind's lot being filled
	for _, d := range sorted {
		if !d.Status.Sendable() {
			continue
		}
		k := kind{d.Env, d.RUC.Number, d.Type}
		i, ok := open[k]
		if !ok || len(lots[i]) == maxLotDEs {
			lots = append(lots, nil)
			i = len(lots) - 1
			open[k] = i
		}
		lots[i] = append(lots[i], d.ID)
	}
	return lots
}
