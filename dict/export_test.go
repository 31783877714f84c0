package dict

import (
	"context"
	"fmt"
	"slices"

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
	EndToEndIDLen               = 32 // the length of a Pix EndToEndId
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
	ErrInvalidCNPJ       = errInvalidCNPJ
	ErrInvalidCPF        = errInvalidCPF
	ErrInvalidCategory   = errInvalidCategory
	ErrInvalidEVP        = errInvalidEVP
	ErrInvalidEmail      = errInvalidEmail
	ErrInvalidPhone      = errInvalidPhone
	ErrInvalidPolicyFile = errInvalidPolicyFile
	ErrUnknownKeyType    = errUnknownKeyType
	ErrUnknownOutcome    = errUnknownOutcome
)

var (
	NewXMLSigner    = newXMLSigner
	NewXMLVerifier  = newXMLVerifier
	ParseKeyAs      = parseKeyAs
	ParsePolicyFile = parsePolicyFile
	ParseRetryAfter = parseRetryAfter
	PolicyFromState = policyFromState
	ValidateCNPJ    = func(s string) error { return validateTaxID(personPJ, s) }
	ValidateCPF     = func(s string) error { return validateTaxID(personPF, s) }
)

// ListPolicies and GetPolicy are LocalPolicies and LocalPolicy of a client of participant on lim and cat.

func ListPolicies(ctx context.Context, lim *throttle.Limiter, cat *Catalog, participant string) (*ListPoliciesResponse, error) {
	return (&Client{meter: Meter{Limiter: lim, Catalog: cat}, participant: participant}).LocalPolicies(ctx)
}

func GetPolicy(ctx context.Context, lim *throttle.Limiter, cat *Catalog, participant, policy string) (*GetPolicyResponse, error) {
	return (&Client{meter: Meter{Limiter: lim, Catalog: cat}, participant: participant}).LocalPolicy(ctx, policy)
}

// Methods of the catalog and the meter that dict keeps to itself.

func (c *Catalog) Cost(key throttle.Key, outcome string) (int64, error) { return c.cost(key, outcome) }
func (c *Catalog) ParticipantKeys(participant string) ([]throttle.Key, error) {
	return c.participantKeys(participant)
}
func (c *Catalog) Apply(f *policyFile) error { return c.apply(f) }

func (m *Meter) Reserve(ctx context.Context, op, ref string, keys ...throttle.Key) (reservation, error) {
	if m.holds == nil { // as a Client or a Transport gives its Meter
		*m = (&Transport{Meter: *m}).meter()
	}
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

// Catalog methods only tests use.

// Refill returns the catalog's refill mode.
func (c *Catalog) Refill() throttle.RefillMode {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.refill
}

// SetRefill sets the refill mode of every policy that does not set its own.
// It fails, changing nothing, if some policy cannot use mode (a rolling
// window must refill its whole capacity per period).
// RefillStepwise (the default) is the conservative reading of the DICT's
// "n tokens per period": it is never more generous than continuous refill.
func (c *Catalog) SetRefill(mode throttle.RefillMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range c.order {
		if err := validateSpec(c.specs[name], mode); err != nil {
			return fmt.Errorf("%w: %s.%v", throttle.ErrInvalidPolicy, name, err)
		}
	}
	c.refill = mode
	return nil
}

// Define adds a policy or replaces one, after validating it. The error
// wraps throttle.ErrInvalidPolicy and names the field at fault.
func (c *Catalog) Define(s Spec) error {
	s = cloneSpec(s)
	if s.Reserve == 0 {
		s.Reserve = 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := validateSpec(s, c.refill); err != nil {
		return fmt.Errorf("%w: %s.%v", throttle.ErrInvalidPolicy, s.Name, err)
	}
	c.define(s)
	return nil
}

// Class returns the class of key's bucket: "PF" or "PJ" for a USER policy,
// the category in effect for a categorised PSP policy, "" otherwise.
func (c *Catalog) Class(key throttle.Key) (string, error) {
	s, category, err := c.find(key.Policy)
	if err != nil {
		return "", err
	}
	_, class, err := s.limitsFor(key.Identifier, category)
	return class, err
}

const BatchDone = batchDone
const KeyCNPJ = keyCNPJ

type CidSetFileResponse = cidSetFileResponse
type ClaimRequest = claimRequest
type ClaimResponse = claimResponse
type CreateCidSetFileRequest = createCidSetFileRequest
type CreateClaimRequest = createClaimRequest
type CreateInfractionReportRequest = createInfractionReportRequest
type CreateRefundRequest = createRefundRequest
type CreateSyncVerificationRequest = createSyncVerificationRequest
type CreateSyncVerificationResponse = createSyncVerificationResponse
type DeleteEntryRequest = deleteEntryRequest
type GetEntryByCidResponse = getEntryByCidResponse
type GetOwnerStatisticsResponse = getOwnerStatisticsResponse
type InfractionReportRequest = infractionReportRequest
type InfractionReportResponse = infractionReportResponse
type ListCidSetEventsResponse = listCidSetEventsResponse
type ListInfractionReportsResponse = listInfractionReportsResponse
type ListRefundsResponse = listRefundsResponse
type RefundRequest = refundRequest
type RefundResponse = refundResponse
type UpdateEntryRequest = updateEntryRequest
type UpdateEntryResponse = updateEntryResponse

const PolicyKeysCheck = policyKeysCheck

const PolicyPoliciesList = policyPoliciesList

var UserPolicyFor = userPolicyFor

// ParseKeyType reads "CPF", "CNPJ", "PHONE", "EMAIL" or "EVP" (exactly, as
// the DICT writes them). The error wraps errUnknownKeyType.
func ParseKeyType(s string) (KeyType, error) {
	if t := KeyType(s); slices.Contains([]KeyType{KeyCPF, keyCNPJ, KeyPhone, KeyEmail, KeyEVP}, t) {
		return t, nil
	}
	return "", fmt.Errorf("%w %q (want CPF, CNPJ, PHONE, EMAIL or EVP)", errUnknownKeyType, s)
}
