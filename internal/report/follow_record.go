package report

import (
	"fmt"
	"strconv"

	"github.com/balde-throttle/balde/sifen"
)

// FollowSummary is how a follow of lot results ended, written last as
// {"follow": {...}} by "balde sifen-send --follow --json".
type FollowSummary struct {
	Approved    int  `json:"approved"`
	Rejected    int  `json:"rejected"`
	Pending     int  `json:"pending"`
	Interrupted bool `json:"interrupted"`
}

// Count adds one document's final status: rejected, or else approved.
func (s *FollowSummary) Count(st sifen.Status) {
	if st == sifen.StatusRejected {
		s.Rejected++
	} else {
		s.Approved++
	}
}

// LotResult is one document's final result ({"lot_result": {...}}).
type LotResult struct {
	Document   int64  `json:"document"`
	CDC        string `json:"cdc"`
	Lot        string `json:"lot"`
	Status     string `json:"status"`      // approved or rejected
	Result     string `json:"result"`      // dEstRes
	AuthNumber string `json:"auth_number"` // dProtAut
	Code       string `json:"code"`
	Message    string `json:"message"`
}

// NewLotResult is d's result record.
func NewLotResult(d sifen.Document) LotResult {
	return LotResult{Document: d.ID, CDC: d.CDC, Lot: d.LotNumber, Status: string(d.Status), Result: d.Result,
		AuthNumber: d.AuthNumber, Code: d.ResponseCode, Message: d.Message}
}

// String renders r on one line: `approved document 3 cdc=… lot=…
// result="Aprobado" dProtAut=… "message"`.
func (r LotResult) String() string {
	line := fmt.Sprintf("%s document %d cdc=%s lot=%s", r.Status, r.Document, r.CDC, r.Lot)
	if r.Result != "" {
		line += fmt.Sprintf(" result=%q", r.Result)
	}
	if r.AuthNumber != "" {
		line += " dProtAut=" + r.AuthNumber
	}
	return line + " " + strconv.Quote(r.Message)
}
