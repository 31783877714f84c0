package sifen

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// Status is where a document stands.
type Status string

const (
	// StatusDraft: imported, never sent, or known not to be at SIFEN.
	StatusDraft Status = "draft"
	// StatusSending: claimed by one send, which has not recorded SIFEN's
	// answer yet (or crashed: see Sender.Resolve).
	StatusSending Status = "sending"
	// StatusSent: in a lot SIFEN queued (0300); no final result yet.
	StatusSent Status = "sent"
	// StatusApproved and StatusRejected are SIFEN's final results.
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
	// StatusError: the last send did not reach SIFEN, or SIFEN did not queue
	// the lot (0301), or the throttle refused it; Message says which. The
	// document may be sent again.
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
	// Claim is the token of the send holding the document while it is
	// sending ("" otherwise).
	Claim string
	// LotHash is the identity of the lot of the last send (packedLot.Hash).
	LotHash string
	// LotNumber is SIFEN's number of that lot (dProtConsLote), once queued.
	LotNumber string
	// ResponseCode is the last code SIFEN gave about this document.
	ResponseCode string
	// Result is SIFEN's dEstRes once the lot's result is known
	// ("Aprobado", ResultApprovedWithObs, "Rechazado"), and
	// AuthNumber the approval's dProtAut.
	Result, AuthNumber string
	// RetryAt is, after a throttle refusal, the earliest instant a send
	// would be admitted.
	RetryAt time.Time
	// Version is bumped by every change.
	Version                                 int64
	CreatedAt, UpdatedAt, ClaimedAt, SentAt time.Time
}

// Filter selects documents for List. Empty fields match everything.
type Filter struct {
	Env       Env
	RUC       string // the number, without check digit
	Statuses  []Status
	LotNumber string
	// CDCs, when set, keeps the documents holding one of them.
	CDCs []string
	// BeforeID is the keyset cursor: documents with a smaller id (List
	// returns the newest first). 0 starts from the newest.
	BeforeID int64
	// Limit bounds the documents returned: default 100, at most 1000.
	Limit int
}

// Reimportable reports whether a DE may be imported under the CDC of the
// stored document d (which must carry its XML): when d is in draft or
// error (never sent, or known not to be at SIFEN) and de is the same XML,
// or other XML and replace is set; or when SIFEN rejected d and de
// is a corrected version (its XML differs). A document being sent, sent
// without a final result, approved, or rejected with the same XML keeps
// its CDC, whatever the mode.
func Reimportable(d Document, de DE, replace bool) bool {
	same := string(d.XML) == string(de.XML)
	switch {
	case d.Status.Sendable():
		return same || replace
	case d.Status == StatusRejected:
		return !same
	}
	return false
}

// GroupLots splits documents into lots SIFEN accepts by count and kind:
// one environment, one RUC and one DE type per lot, at most maxLotDEs
// each, in id order within a lot, lots ordered by their first document.
// Documents that are not sendable are left out. A lot of very large DEs may
// still exceed maxLotMessageBytes (Send says ErrLotTooBig): SendDocuments
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

// fitLot returns how many of docs, from the first, fit in one lot: the
// longest prefix whose siRecepLoteDE message (the lot zipped, in base64,
// in its envelope) is at most maxLotMessageBytes; 0 when the first alone
// is too big. docs must carry their XML (Sender.FitLot reads them). It bisects on the
// prefix length, a longer prefix never zipping smaller. It checks the size
// only: Send still applies every lot rule.
//
// Errors: the errors of ParseLote for a stored XML that no longer parses.
func fitLot(docs []Document) (int, error) {
	des := make([]DE, len(docs))
	for i, d := range docs {
		de, err := storedDE(d)
		if err != nil {
			return 0, err
		}
		des[i] = de
	}
	fits := func(n int) (bool, error) {
		_, _, err := Lote{DEs: des[:n]}.zip()
		if errors.Is(err, ErrLotTooBig) {
			return false, nil
		}
		return err == nil, err
	}
	lo, hi := 0, len(des) // fits(lo) is known true (an empty prefix), fits(hi+1) false
	for lo < hi {
		mid := (lo + hi + 1) / 2
		ok, err := fits(mid)
		if err != nil {
			return 0, err
		}
		if ok {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}
