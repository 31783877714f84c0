// Package dict is balde's adapter for the DICT, the Pix key directory run
// by Banco Central do Brasil: the catalog of the DICT's rate-limit policies
// (the DICT manual, chapter 19, exact), the key types, the counting rules,
// the XML of the API (OpenAPI 1.8.0) with Marshal and Unmarshal, the table of
// its operations (Routes), and Transport, an http.RoundTripper that throttles
// any DICT client; Client is built on it. What it stores goes through Records
// (dictsql implements it). The simulator, dictsim, shares none of this code.
//
// The flow of one request through Transport:
//
//  1. validate the input (key, payer id, ISPB, EndToEndId): bad input is an
//     error, and nothing is taken or sent;
//  2. hold: take the worst-case cost from every bucket the request is
//     charged to (20 from the payer and 3 from the participant for a
//     getEntry), all or nothing, admitted while each bucket is positive as
//     the DICT admits; a refusal is a Decision and nothing is sent;
//  3. send, then refund the difference by the response's status (a 200
//     gives back 19 and 2; a 500, or a request that provably never left,
//     everything); a remote 429 refunds its hold and lowers only the bucket
//     the DICT says is empty for the remote Retry-After, in one
//     transaction, leaving out the holds still in flight.
//
// Tokens are whole tokens and periods time.Duration. A bucket key's Env is
// the catalog's ("prod" by default) and its Identifier the payer's CPF or
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

// Operations of the DICT API, by their names in the API reference.
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
