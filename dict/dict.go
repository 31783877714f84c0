// Package dict is balde's adapter for the DICT, the Pix key directory run
// by Banco Central do Brasil: the policy catalog of the DICT's rate limits
// (the DICT manual, chapter 19, exact), the key types, the counting rules
// (what a getEntry costs by outcome, what a payment credits), the XML of
// the API (OpenAPI 1.8.0), the table of its operations (Routes), and
// Transport, an http.RoundTripper that throttles any DICT client; Client is
// built on it. It imports no database library: what it stores goes through
// Records (dictsql implements it). The simulator, dictsim, shares none of
// this code.
//
// Its surface is what an application, the balde command or the README
// uses, plus the typed messages of the whole DICT API (the request and
// response XML types of xml.go and xml_api.go, with Marshal and
// Unmarshal): a PSP that sends its own requests through Transport builds
// and reads them with these.
//
// The flow of one request (Transport does this for every operation):
//
//  1. validate the input (key, payer id, ISPB, EndToEndId): bad input is
//     an error, nothing is taken and nothing is sent;
//  2. hold: Limiter.Take the worst-case cost of the request from every
//     bucket it is charged to (20 from the payer and 3 from the participant
//     for a getEntry), all or nothing, admitted while each bucket is
//     positive as the DICT admits — a refusal is a Decision and nothing is
//     sent (the result's Decision out of every Client method; out of
//     Transport.RoundTrip, a *throttle.RefusedError that carries it);
//  3. send, then refund the difference by the response's status with
//     Limiter.Adjust (a 200 gives back 19 and 2, a 500 everything, and so
//     does a request that provably never left); a remote 429 refunds its
//     hold and lowers only the bucket the DICT says is empty for the remote
//     Retry-After, in one transaction (Limiter.AdjustAndSync), leaving out
//     the holds still in flight.
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
// reference (the DICT manual's policy table).
const (
	OpGetEntry           = "getEntry"
	opGetEntryStatistics = "getEntryStatistics"
	opCheckKeys          = "checkKeys"
	opCreateEntry        = "createEntry"
	opDeleteEntry        = "deleteEntry"
	opListClaims         = "listClaims"
	opGetBucketState     = "getBucketState"
	OpListBucketStates   = "listBucketStates"
)
