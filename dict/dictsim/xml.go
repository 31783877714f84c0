package dictsim

import (
	"bytes"
	"encoding/xml"
	"time"
)

// The simulator's own XML, after the DICT API's public OpenAPI (1.8.0) and
// the DICT manual, chapter 19: element names and order as published; the
// requests hold only what the simulator reads.

const timeLayout = "2006-01-02T15:04:05.000Z"

type stamp time.Time

func (t stamp) MarshalText() ([]byte, error) {
	return []byte(time.Time(t).UTC().Format(timeLayout)), nil
}

func (t *stamp) UnmarshalText(b []byte) error {
	v, err := time.Parse(time.RFC3339Nano, string(bytes.TrimSpace(b)))
	*t = stamp(v)
	return err
}

// Account is the account a key points to.
type Account struct {
	Participant   string
	Branch        string `xml:",omitempty"`
	AccountNumber string
	AccountType   string
	OpeningDate   stamp
}

// Owner is the owner of a key (Type NATURAL_PERSON or LEGAL_PERSON).
type Owner struct {
	Type        string
	TaxIDNumber string `xml:"TaxIdNumber"`
	Name        string
	TradeName   string `xml:",omitempty"`
}

// Entry is a key of the directory.
type Entry struct {
	Key              string
	KeyType          string
	Account          Account
	Owner            Owner
	CreationDate     *stamp `xml:",omitempty"`
	KeyOwnershipDate *stamp `xml:",omitempty"`
}

// head starts the entry, key and claim responses.
type head struct {
	Signature     struct{} // empty: the simulator signs nothing
	ResponseTime  stamp
	CorrelationID string `xml:"CorrelationId"`
}

type counter struct {
	Type string `xml:"type,attr"`
	By   string `xml:"by,attr"`
	D3   int64  `xml:"d3,attr"`
	D30  int64  `xml:"d30,attr"`
	M6   int64  `xml:"m6,attr"`
}

type statistics struct {
	LastUpdated stamp
	Counters    []counter `xml:"Counters>Counter"`
}

type getEntryResponse struct {
	XMLName xml.Name `xml:"GetEntryResponse"`
	head
	Entry      Entry
	Statistics statistics
}

type createEntryRequest struct {
	XMLName xml.Name `xml:"CreateEntryRequest"`
	Entry   Entry
}

type createEntryResponse struct {
	XMLName xml.Name `xml:"CreateEntryResponse"`
	head
	Entry Entry
}

type deleteEntryRequest struct {
	XMLName xml.Name `xml:"DeleteEntryRequest"`
	Key     string
}

type deleteEntryResponse struct {
	XMLName xml.Name `xml:"DeleteEntryResponse"`
	head
	Key string
}

type checkKeysRequest struct {
	XMLName xml.Name `xml:"CheckKeysRequest"`
	Keys    []string `xml:"Keys>Key"`
}

type keyCheck struct {
	HasEntry bool   `xml:"hasEntry,attr"`
	Key      string `xml:",chardata"`
}

type checkKeysResponse struct {
	XMLName xml.Name `xml:"CheckKeysResponse"`
	head
	Keys []keyCheck `xml:"Keys>Key"`
}

type listClaimsResponse struct {
	XMLName xml.Name `xml:"ListClaimsResponse"`
	head
	HasMoreElements bool
	Claims          struct{} `xml:"Claims"`
}

type policyState struct {
	AvailableTokens int64
	Capacity        int64
	RefillTokens    int64
	RefillPeriodSec int64
	Name            string
}

type listPoliciesResponse struct {
	XMLName       xml.Name `xml:"ListPoliciesResponse"`
	Signature     struct{}
	CorrelationID string `xml:"CorrelationId"`
	ResponseTime  stamp
	Category      string
	Policies      []policyState `xml:"Policies>Policy"`
}

type getPolicyResponse struct {
	XMLName       xml.Name `xml:"GetPolicyResponse"`
	Signature     struct{}
	CorrelationID string `xml:"CorrelationId"`
	ResponseTime  stamp
	Category      string
	Policy        policyState
}

type violation struct {
	Reason   string `xml:"reason"`
	Value    string `xml:"value,omitempty"`
	Property string `xml:"property,omitempty"`
}

// problem is an RFC 7807 problem as the DICT writes it.
type problem struct {
	XMLName       xml.Name     `xml:"urn:ietf:rfc:7807 problem"`
	Type          string       `xml:"type"`
	Title         string       `xml:"title"`
	Status        int          `xml:"status"`
	Detail        string       `xml:"detail,omitempty"`
	CorrelationID string       `xml:"correlationId,omitempty"`
	Violations    *[]violation `xml:"violations>violation"` // nil: no violations element
}

const problemPrefix = "https://dict.pi.rsfn.net.br/api/v2/error/"
