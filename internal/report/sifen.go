package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/sifen"
)

// SifenItem is one DE of a send of files (sifen.ReadFiles, ImportFiles,
// SendDocuments) and what became of it: the item a sifen-send run
// reports. Message is in English (the JSON record's); Said, when set, is
// the same in the reader's language, for the plain line.
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

// SifenRecord is the JSON line of one DE ("balde sifen-send --json").
// RUC is empty for a file that gave no DE.
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
		Code: it.Code, Lot: it.Lot, WaitS: Seconds(it.Wait), Message: it.Message,
	}
	if it.DE.RUC.Number != "" {
		r.RUC = it.DE.RUC.String()
	}
	return r
}

// Line renders it for the plain output: `sent    a.xml cdc=… ruc=…
// env=test lot=… code=0300 wait=10s "message"`, each field left out while
// empty, the message in the reader's language when Said is set.
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
	if it.Said != "" {
		fmt.Fprintf(&b, " %q", it.Said)
	} else if it.Message != "" {
		fmt.Fprintf(&b, " %q", it.Message)
	}
	return b.String()
}
