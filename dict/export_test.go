package dict

import (
	"context"

	"github.com/balde-throttle/balde/throttle"
)

// The names dict keeps to itself, for its external tests.

const (
	PF                          = personPF
	PJ                          = personPJ
	ProblemBadRequest           = "BadRequest"
	ProblemForbidden            = "Forbidden"
	ProblemNotFound             = "NotFound"
	ProblemRateLimited          = "RateLimited"
	ProblemInternalServerError  = "InternalServerError"
	ProblemServiceUnavailable   = "ServiceUnavailable"
	ProblemTypePrefix           = problemTypePrefix
	DefaultCategoryRecheck      = defaultCategoryRecheck
	EndToEndIDLen               = endToEndIDLen
	EventPayment                = eventPayment
	MaxEmailLen                 = maxEmailLen
	OpCheckKeys                 = opCheckKeys
	OpCreateEntry               = opCreateEntry
	OpListClaims                = opListClaims
	OutcomeTransportError       = outcomeTransportError
	PolicyCidsFilesWrite        = policyCidsFilesWrite
	PolicyClaimsListWithoutRole = policyClaimsListWithoutRole
	PolicyEntriesWrite          = policyEntriesWrite
	PolicyPoliciesRead          = policyPoliciesRead
	ProblemEntryNotFound        = problemEntryNotFound
	ScopeEntity                 = scopeEntity
	SignatureNamespace          = signatureNamespace
)

var (
	ParsePayerID         = parsePayerID
	Categories           = categoryNames
	ErrInvalidCNPJ       = errInvalidCNPJ
	ErrInvalidCPF        = errInvalidCPF
	ErrInvalidCategory   = errInvalidCategory
	ErrInvalidEVP        = errInvalidEVP
	ErrInvalidEmail      = errInvalidEmail
	ErrInvalidPhone      = errInvalidPhone
	ErrInvalidPolicyFile = errInvalidPolicyFile
	ErrLookupFormat      = errLookupFormat
	ErrUnknownKeyType    = errUnknownKeyType
	ErrUnknownOutcome    = errUnknownOutcome
)

var (
	GetPolicy               = getPolicy
	ListPolicies            = listPolicies
	NewListPoliciesResponse = newListPoliciesResponse
	NewXMLSigner            = newXMLSigner
	NewXMLVerifier          = newXMLVerifier
	ParseKeyAs              = parseKeyAs
	ParseKeyType            = parseKeyType
	ParsePolicyFile         = parsePolicyFile
	ParseRetryAfter         = parseRetryAfter
	PolicyFromState         = policyFromState
	ValidateCNPJ            = validateCNPJ
	ValidateCPF             = validateCPF
)

// Methods of the catalog and the meter that dict keeps to itself.

func (c *Catalog) Refill() throttle.RefillMode                          { return c.refillMode() }
func (c *Catalog) SetRefill(mode throttle.RefillMode) error             { return c.setRefill(mode) }
func (c *Catalog) Define(s Spec) error                                  { return c.add(s) }
func (c *Catalog) Class(key throttle.Key) (string, error)               { return c.class(key) }
func (c *Catalog) Admission(key throttle.Key) (int64, error)            { return c.admission(key) }
func (c *Catalog) Cost(key throttle.Key, outcome string) (int64, error) { return c.cost(key, outcome) }
func (c *Catalog) Credit(key throttle.Key, event string) (int64, error) { return c.credit(key, event) }
func (c *Catalog) ParticipantKeys(participant string) ([]throttle.Key, error) {
	return c.participantKeys(participant)
}
func (c *Catalog) Apply(f *policyFile) error { return c.apply(f) }

func (m *Meter) Reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (reservation, error) {
	return m.reserve(ctx, op, ref, keys...)
}

func (m *Meter) Settle(ctx context.Context, r reservation, outcome string) ([]throttle.Adjusted, error) {
	return m.settle(ctx, r, outcome)
}

func (m *Meter) Credit(ctx context.Context, ref, event string, keys ...throttle.Key) ([]throttle.Adjusted, error) {
	return m.credit(ctx, ref, event, keys...)
}

type PersonType = personType
type Limits = limits

const (
	MaxRetryAfter            = maxRetryAfter
	PolicyClaimsListWithRole = policyClaimsListWithRole
	OpGetBucketState         = opGetBucketState
	OpDeleteEntry            = opDeleteEntry
)
