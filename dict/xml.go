package dict

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// The XML of the DICT API: element names and order follow the API reference
// (the DICT manual, chapter 19, for the policy responses) exactly.

// XMLHeader is the declaration the DICT writes before every document.
const XMLHeader = `<?xml version="1.0" encoding="UTF-8" ?>` + "\n"

// MaxBodySize bounds the XML bodies Client and Transport read (1 MiB).
const MaxBodySize = 1 << 20

// signatureNamespace is the namespace of the XMLDSig Signature element.
const signatureNamespace = "http://www.w3.org/2000/09/xmldsig#"

// Signature is the XMLDSig element of a DICT message, kept verbatim with its
// namespace so that a signed document round-trips.
type Signature struct {
	XMLName xml.Name
	XML     string `xml:",innerxml"`
}

// Timestamp is an instant in the DICT's format, UTC with milliseconds
// ("2022-09-02T13:19:25.833Z"). It reads any RFC 3339 time and writes one it
// read back as it was written while its Time is unchanged, so that
// re-encoding a signed document changes no byte of it.
type Timestamp struct {
	time.Time
	text string // as read by UnmarshalText
}

// formatTimestamp renders t as the DICT does ("2022-09-02T13:19:25.833Z").
func formatTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// MarshalText implements encoding.TextMarshaler.
func (t Timestamp) MarshalText() ([]byte, error) {
	if t.text != "" {
		if v, err := time.Parse(time.RFC3339Nano, t.text); err == nil && v.Equal(t.Time) {
			return []byte(t.text), nil
		}
	}
	return []byte(formatTimestamp(t.Time)), nil
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (t *Timestamp) UnmarshalText(b []byte) error {
	text := strings.TrimSpace(string(b))
	v, err := time.Parse(time.RFC3339Nano, text)
	if err != nil {
		return fmt.Errorf("dict: timestamp %q: %w", truncate(string(b)), err)
	}
	t.Time, t.text = v, text
	return nil
}

// answer opens every signed answer of the DICT but the policy ones.
type answer struct {
	Signature     Signature
	ResponseTime  Timestamp
	CorrelationID string `xml:"CorrelationId"`
}

// Policy is the state of one bucket as the DICT reports it.
type Policy struct {
	AvailableTokens int64
	Capacity        int64
	RefillTokens    int64
	RefillPeriodSec int64
	Name            string
}

// ListPoliciesResponse is the answer of listBucketStates (GET /api/v2/policies/).
type ListPoliciesResponse struct {
	XMLName       xml.Name `xml:"ListPoliciesResponse"`
	Signature     Signature
	CorrelationID string `xml:"CorrelationId"`
	ResponseTime  Timestamp
	Category      string
	Policies      []Policy `xml:"Policies>Policy"`
}

// GetPolicyResponse is the answer of getBucketState (GET /api/v2/policies/{policy}).
type GetPolicyResponse struct {
	XMLName       xml.Name `xml:"GetPolicyResponse"`
	Signature     Signature
	CorrelationID string `xml:"CorrelationId"`
	ResponseTime  Timestamp
	Category      string
	Policy        Policy
}

// Account is a transactional account in Brazil.
type Account struct {
	Participant   string
	Branch        string `xml:",omitempty"`
	AccountNumber string
	AccountType   string
	OpeningDate   Timestamp
}

// Owner is the owner of a key: Type is NATURAL_PERSON or LEGAL_PERSON.
type Owner struct {
	Type        string
	TaxIDNumber string `xml:"TaxIdNumber"`
	Name        string
	TradeName   string `xml:",omitempty"`
}

// Entry is a key and the account it points to.
type Entry struct {
	Key                   string
	KeyType               KeyType
	Account               Account
	Owner                 Owner
	CreationDate          *Timestamp `xml:",omitempty"`
	KeyOwnershipDate      *Timestamp `xml:",omitempty"`
	OpenClaimCreationDate *Timestamp `xml:",omitempty"`
}

// GetEntryResponse is the answer of getEntry (GET /api/v2/entries/{Key}).
type GetEntryResponse struct {
	XMLName xml.Name `xml:"GetEntryResponse"`
	answer
	Entry      Entry
	Statistics *Statistics `xml:",omitempty"`
}

// Statistics are the anti-fraud counters of an entry (OpenAPI 1.8.0), over
// 3 days, 30 days and 6 months (quantized).
type Statistics struct {
	LastUpdated Timestamp
	Counters    []Counter `xml:"Counters>Counter"`
}

// Counter is one statistic: Type (SETTLEMENTS, REPORTED_FRAUDS,
// CONFIRMED_FRAUDS, REJECTED) by KEY, OWNER or ACCOUNT.
type Counter struct {
	Type string `xml:"type,attr"`
	By   string `xml:"by,attr,omitempty"`
	D3   int64  `xml:"d3,attr"`
	D30  int64  `xml:"d30,attr"`
	M6   int64  `xml:"m6,attr"`
}

// CheckKeysRequest is the body of checkKeys (POST /api/v2/keys/check): 1 to
// maxCheckKeys keys, unsigned.
type CheckKeysRequest struct {
	XMLName xml.Name `xml:"CheckKeysRequest"`
	Keys    []string `xml:"Keys>Key"`
}

// maxCheckKeys is the most keys one checkKeys may ask about.
const maxCheckKeys = 200

// KeyCheck says whether one key has an entry.
type KeyCheck struct {
	HasEntry bool   `xml:"hasEntry,attr"`
	Key      string `xml:",chardata"`
}

// CheckKeysResponse is the answer of checkKeys.
type CheckKeysResponse struct {
	XMLName xml.Name `xml:"CheckKeysResponse"`
	answer
	Keys []KeyCheck `xml:"Keys>Key"`
}

// CreateEntryRequest is the body of createEntry (POST /api/v2/entries/).
// Reason is USER_REQUESTED or RECONCILIATION; RequestID, a UUID, makes it idempotent.
type CreateEntryRequest struct {
	XMLName   xml.Name `xml:"CreateEntryRequest"`
	Signature Signature
	Entry     Entry
	Reason    string
	RequestID string `xml:"RequestId"`
}

// CreateEntryResponse is the answer of createEntry.
type CreateEntryResponse struct {
	XMLName xml.Name `xml:"CreateEntryResponse"`
	answer
	Entry Entry
}

// deleteEntryRequest is the body of deleteEntry (POST /api/v2/entries/{Key}/delete).
type deleteEntryRequest struct {
	XMLName     xml.Name `xml:"DeleteEntryRequest"`
	Signature   Signature
	Key         string
	Participant string
	Reason      string
}

// DeleteEntryResponse is the answer of deleteEntry.
type DeleteEntryResponse struct {
	XMLName xml.Name `xml:"DeleteEntryResponse"`
	answer
	Key string
}

// Claim is a claim of a key (portability or ownership). The fields the DICT
// sets (Id, Status, periods, LastModified, reasons) are empty in a createClaim.
type Claim struct {
	Type                string
	Key                 string
	KeyType             KeyType
	ClaimerAccount      Account
	Claimer             Owner
	DonorParticipant    string     `xml:",omitempty"`
	ID                  string     `xml:"Id,omitempty"`
	Status              string     `xml:",omitempty"`
	ResolutionPeriodEnd *Timestamp `xml:",omitempty"`
	CompletionPeriodEnd *Timestamp `xml:",omitempty"`
	LastModified        *Timestamp `xml:",omitempty"`
	ConfirmReason       string     `xml:",omitempty"`
	CancelReason        string     `xml:",omitempty"`
	CancelledBy         string     `xml:",omitempty"`
}

// ListClaimsResponse is the answer of listClaims (GET /api/v2/claims/).
type ListClaimsResponse struct {
	XMLName xml.Name `xml:"ListClaimsResponse"`
	answer
	HasMoreElements bool
	Claims          []Claim `xml:"Claims>Claim"`
}

const (
	problemNamespace     = "urn:ietf:rfc:7807"                         // of RFC 7807 problems in XML
	problemTypePrefix    = "https://dict.pi.rsfn.net.br/api/v2/error/" // of every DICT problem's type
	problemEntryNotFound = "EntryNotFound"                             // getEntry's 404
)

// ProblemType is the DICT's problem type (after its prefix) for status:
// BadRequest, Forbidden, NotFound, MethodNotAllowed, RateLimited,
// InternalServerError, or ServiceUnavailable for a 502, 503 or 504; any
// other 4xx is BadRequest, any other 5xx InternalServerError.
func ProblemType(status int) string {
	switch status {
	case http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusInternalServerError:
		return strings.ReplaceAll(http.StatusText(status), " ", "")
	case http.StatusTooManyRequests:
		return "RateLimited"
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return "ServiceUnavailable"
	}
	if status >= 500 {
		return "InternalServerError"
	}
	return "BadRequest"
}

// Problem is an RFC 7807 problem as the DICT writes it:
//
//	<problem xmlns="urn:ietf:rfc:7807">
//	    <type>https://dict.pi.rsfn.net.br/api/v2/error/EntryNotFound</type>
//	    <title>Entry not found</title>
//	    <status>404</status>
//	    <detail>...</detail>
//	</problem>
type Problem struct {
	XMLName       xml.Name    `xml:"urn:ietf:rfc:7807 problem"`
	Type          string      `xml:"type"`
	Title         string      `xml:"title"`
	Status        int         `xml:"status"`
	Detail        string      `xml:"detail,omitempty"`
	CorrelationID string      `xml:"correlationId,omitempty"`
	Violations    *Violations `xml:"violations,omitempty"`
}

// Violations lists what a request violated (OpenAPI 1.8.0's Violation).
type Violations struct {
	Violation []Violation `xml:"violation"`
}

// Violation is one violation: Reason is required, Property and Value optional.
type Violation struct {
	Reason   string `xml:"reason"`
	Value    string `xml:"value,omitempty"`
	Property string `xml:"property,omitempty"`
}

// Names reports whether the problem names policy: a violation whose value
// or property is policy, or the detail mentioning it as a whole word (a run
// of ASCII letters, digits and _, as every DICT policy name is).
func (p *Problem) Names(policy string) bool {
	named := func(v Violation) bool { return v.Value == policy || v.Property == policy }
	return p.Violations != nil && slices.ContainsFunc(p.Violations.Violation, named) ||
		slices.Contains(wordRE.FindAllString(p.Detail, -1), policy)
}

// NewProblem returns a problem of the given type (e.g. problemEntryNotFound).
func NewProblem(typ string, status int, title, detail string) *Problem {
	return &Problem{Type: problemTypePrefix + typ, Title: title, Status: status, Detail: detail}
}

// TypeName returns the problem's type without problemTypePrefix
// ("EntryNotFound"), or the whole type when it lacks the prefix.
func (p *Problem) TypeName() string { return strings.TrimPrefix(p.Type, problemTypePrefix) }

// Marshal renders v as a DICT document: XMLHeader, then v indented by four
// spaces, then a newline — byte for byte the layout of the DICT manual's examples.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(XMLHeader)
	enc := xml.NewEncoder(&b)
	enc.Indent("", "    ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("dict: encode %T: %w", v, err)
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// Unmarshal decodes one DICT document into v, whose root element must match.
// The error wraps ErrMalformedResponse.
func Unmarshal(data []byte, v any) error {
	if len(data) > MaxBodySize {
		return fmt.Errorf("%w: %d bytes (at most %d)", ErrMalformedResponse, len(data), MaxBodySize)
	}
	if err := xml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%w: %T: %w", ErrMalformedResponse, v, err)
	}
	return nil
}

// Decode is Unmarshal of what r holds (at most MaxBodySize bytes).
func Decode(r io.Reader, v any) error {
	data, err := io.ReadAll(io.LimitReader(r, MaxBodySize+1))
	if err != nil {
		return fmt.Errorf("%w: read: %w", ErrMalformedResponse, err)
	}
	return Unmarshal(data, v)
}

// DecodeProblem reads an RFC 7807 problem. Besides malformed XML it rejects
// a problem with no type or a status outside 100..599 (ErrMalformedResponse).
func DecodeProblem(data []byte) (*Problem, error) {
	var p Problem
	if err := Unmarshal(data, &p); err != nil {
		return nil, err
	}
	if p.XMLName.Space != problemNamespace {
		return nil, fmt.Errorf("%w: problem in namespace %q (want %q)", ErrMalformedResponse, truncate(p.XMLName.Space), problemNamespace)
	}
	if p.Type == "" || p.Status < 100 || p.Status > 599 {
		return nil, fmt.Errorf("%w: problem without a type or with status %d", ErrMalformedResponse, p.Status)
	}
	return &p, nil
}

// policyFromState reports a bucket of the mirror as the DICT would (the
// period in whole seconds, rounded up).
func policyFromState(s throttle.BucketState) Policy {
	return Policy{
		AvailableTokens: s.Tokens,
		Capacity:        s.Policy.Capacity,
		RefillTokens:    s.Policy.RefillTokens,
		RefillPeriodSec: int64((s.Policy.RefillPeriod + time.Second - 1) / time.Second),
		Name:            s.Key.Policy,
	}
}

// brasilia is the DICT's local time, in which correlation ids are stamped.
var brasilia = time.FixedZone("BRT", -3*60*60)

// NewCorrelationID returns a correlation id in the DICT's layout
// ("B20220902101925801123456781A6998"): "B", the Brasília time as
// yyyyMMddHHmmssSSS, the ISPB and 6 random hexadecimal digits.
func NewCorrelationID(participant string, now time.Time) string {
	t := now.In(brasilia)
	return "B" + t.Format("20060102150405") + fmt.Sprintf("%03d", t.Nanosecond()/1e6) + participant + randomString("0123456789ABCDEF", 6)
}
