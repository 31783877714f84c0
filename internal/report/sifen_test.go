package report_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/report"
	"github.com/balde-throttle/balde/sifen"
)

func TestSifenItem(t *testing.T) {
	de := sifen.DE{CDC: "01800695631001001000000612026010210000001239", RUC: sifen.RUC{Number: "80069563", DV: 1}}
	it := report.SifenItem{File: "a.xml", Env: sifen.EnvTest, DE: de, Document: 7, Result: report.Blocked,
		Code: "0301", Lot: "42", Wait: 1500 * time.Millisecond, Message: "blocked: cooldown", Said: "bloqueado: espera"}
	require.Equal(t, `blocked a.xml cdc=`+de.CDC+` ruc=80069563-1 env=test lot=42 code=0301 wait=1.5s "bloqueado: espera"`, it.Line())
	b, err := json.Marshal(it.Record())
	require.NoError(t, err)
	require.JSONEq(t, `{"file": "a.xml", "cdc": "`+de.CDC+`", "document": 7, "ruc": "80069563-1", "env": "test",
		"result": "blocked", "code": "0301", "lot": "42", "wait_s": 1.5, "message": "blocked: cooldown"}`, string(b), "English in JSON")

	// A file that gave no DE: no CDC, RUC or document; the English message
	// when none is said.
	bad := report.SifenItem{File: "b.xml", Env: sifen.EnvProd, Result: report.Invalid, Message: "b.xml: not XML"}
	require.Equal(t, `invalid b.xml env=prod "b.xml: not XML"`, bad.Line())
	b, err = json.Marshal(bad.Record())
	require.NoError(t, err)
	require.JSONEq(t, `{"file": "b.xml", "ruc": "", "env": "prod", "result": "invalid", "code": "", "lot": "", "wait_s": 0,
		"message": "b.xml: not XML"}`, string(b))
}
