// Package dict is balde's adapter for the DICT, the Pix key directory run
// by Banco Central do Brasil: the policy catalog of the DICT's rate limits
// (seed 001, exact), the key types, the counting rules (what a getEntry
// costs by outcome, what a payment credits), the XML of the API, and a
// Client that asks the throttle before every request and settles after the
// response. The simulator that enforces the same limits server-side is in
// dictsim.
//
// The flow of one request (Client does this for every operation):
//
//  1. validate the input (key, payer id, ISPB, EndToEndId): bad input is
//     an error, nothing is taken and nothing is sent;
//  2. reserve: Limiter.Take the policy's reserve (1 token) from every bucket
//     the operation is charged to, all or nothing — a refusal is a
//     *RefusedError and the request is never sent;
//  3. send, then settle by the response's status with Limiter.Adjust
//     (a getEntry 404 costs 20 tokens to the payer and 3 to the participant,
//     a 500 is refunded), and on a remote 429 bring the local buckets down
//     to 0 (Limiter.Sync) for the remote Retry-After.
//
// Units: tokens are whole tokens; periods are time.Duration. Every bucket
// key is throttle.Key{Policy, Env, Identifier} where Env is the catalog's
// DICT environment ("prod" by default) and Identifier is the payer's CPF or
// CNPJ for USER policies, the participant's ISPB for PSP policies.
package dict

// Headers of the DICT API.
const (
	HeaderRequestingParticipant = "PI-RequestingParticipant"
	HeaderPayerID               = "PI-PayerId"
	HeaderEndToEndID            = "PI-EndToEndId"
)

// APIPrefix is the path prefix of every DICT API v2 operation.
const APIPrefix = "/api/v2"

// Content types of the DICT API.
const (
	ContentTypeXML        = "application/xml"
	ContentTypeProblemXML = "application/problem+xml"
)

// Operations of the DICT API used by balde, by their names in the API
// reference (seed 001's policy table).
const (
	OpGetEntry           = "getEntry"
	OpGetEntryStatistics = "getEntryStatistics"
	OpCheckKeys          = "checkKeys"
	OpCreateEntry        = "createEntry"
	OpDeleteEntry        = "deleteEntry"
	OpListClaims         = "listClaims"
	OpGetBucketState     = "getBucketState"
	OpListBucketStates   = "listBucketStates"
)
