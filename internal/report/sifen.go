package report

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
)

// SifenItem is one DE of a sifen-send run and what became of it: Message
// in English, Said, when set, in the reader's language.
type SifenItem struct {
	File     string
	Env      sifen.Env
	DE       sifen.DE
	Document int64 // the document's id once imported

	Result  Result
	Code    string
	Lot     string
	Wait    time.Duration
	Message string
	Said    string
}

// SifenRecord is the JSON line of one DE; RUC is empty without a DE.
type SifenRecord struct {
	File     string  `json:"file"`
	CDC      string  `json:"cdc,omitempty"`
	Document int64   `json:"document,omitempty"`
	RUC      string  `json:"ruc"`
	Env      string  `json:"env"`
	Result   Result  `json:"result"`
	Code     string  `json:"code"`
	Lot      string  `json:"lot"`
	WaitS    float64 `json:"wait_s"`
	Message  string  `json:"message"`
}

// Record is it's JSON line.
func (it *SifenItem) Record() SifenRecord {
	r := SifenRecord{
		File: it.File, CDC: it.DE.CDC, Document: it.Document, Env: string(it.Env), Result: it.Result,
		Code: it.Code, Lot: it.Lot, WaitS: view.Seconds(it.Wait), Message: it.Message,
	}
	if it.DE.RUC.Number != "" {
		r.RUC = it.DE.RUC.String()
	}
	return r
}

// Line renders it: `sent    a.xml cdc=… ruc=… env=test lot=… code=0300
// wait=10s "message"`, each field left out while empty.
func (it *SifenItem) Line() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-7s %s", it.Result, it.File)
	if it.DE.CDC != "" {
		fmt.Fprintf(&b, " cdc=%s ruc=%s", it.DE.CDC, it.DE.RUC)
	}
	fmt.Fprintf(&b, " env=%s", it.Env)
	if it.Lot != "" {
		fmt.Fprintf(&b, " lot=%s", it.Lot)
	}
	if it.Code != "" {
		fmt.Fprintf(&b, " code=%s", it.Code)
	}
	if it.Wait > 0 {
		fmt.Fprintf(&b, " wait=%s", view.FormatWait(it.Wait))
	}
	if m := cmp.Or(it.Said, it.Message); m != "" {
		fmt.Fprintf(&b, " %q", m)
	}
	return b.String()
}
