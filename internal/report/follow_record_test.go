package report_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen"
)

func TestFollowSummaryCount(t *testing.T) {
	var s report.FollowSummary
	for _, st := range []sifen.Status{sifen.StatusApproved, sifen.StatusRejected, sifen.StatusApproved} {
		s.Count(st)
	}
	s.Pending = 4
	b, err := json.Marshal(s)
	require.NoError(t, err)
	require.JSONEq(t, `{"approved": 2, "rejected": 1, "pending": 4, "interrupted": false}`, string(b))
}

func TestLotResult(t *testing.T) {
	d := sifen.Document{ID: 3, CDC: "0180069563", LotNumber: "L1", Status: sifen.StatusApproved,
		Result: "Aprobado", AuthNumber: "123", ResponseCode: "0260", Message: "Autorización del DE satisfactoria"}
	r := report.NewLotResult(d)
	require.Equal(t, `approved document 3 cdc=0180069563 lot=L1 result="Aprobado" dProtAut=123 "Autorización del DE satisfactoria"`, r.String())
	b, err := json.Marshal(r)
	require.NoError(t, err)
	require.JSONEq(t, `{"document": 3, "cdc": "0180069563", "lot": "L1", "status": "approved", "result": "Aprobado",
		"auth_number": "123", "code": "0260", "message": "Autorización del DE satisfactoria"}`, string(b))

	d.Status, d.Result, d.AuthNumber, d.Message = sifen.StatusRejected, "", "", "CDC inválido"
	require.Equal(t, `rejected document 3 cdc=0180069563 lot=L1 "CDC inválido"`, report.NewLotResult(d).String())
}
