package sifen

import (
	"context"
	"time"
)

// SOAPServices are SIFEN's three SOAP services: *Client, or a test's or an
// application's own. Implementations are safe for concurrent use.
type SOAPServices interface {
	// RecepcionLote sends a lot (siRecepLoteDE). An error proving the request
	// never left (notSent) leaves the documents sendable; any other leaves them
	// in "sending" for Resolve.
	RecepcionLote(ctx context.Context, env Env, zip []byte) (EnvioLoteResponse, error)
	ConsultaLote(ctx context.Context, env Env, lotNumber string) (ConsultaLoteResponse, error)
	ConsultaDE(ctx context.Context, env Env, cdc string) (ConsultaDEResponse, error)
}

var _ SOAPServices = (*Client)(nil)

// DocumentStore keeps documents and lots for every process on one database
// (a RUC's gate is its bucket in the throttle). Each method is one short
// transaction, none held across a call to SIFEN; sifen/sifensql implements
// it. Database failures wrap throttle.ErrStoreUnavailable; a cancelled
// context stays itself.
type DocumentStore interface {
	// Import stores des as drafts of env, all or none, and returns their ids in
	// order. A stored CDC is taken again when CheckReimport says so
	// (docs/decisions/0057), else the error is a *CDCError with Now set.
	Import(ctx context.Context, env Env, des []DE, replace bool, now time.Time) ([]int64, error)
	// Documents returns the documents ids in id order, with their XML when
	// withXML; ErrNotFound names a missing one.
	Documents(ctx context.Context, ids []int64, withXML bool) ([]Document, error)
	List(ctx context.Context, f Filter) ([]Document, error)
	CountByStatus(ctx context.Context, env Env) (map[Status]int64, error)
	// Claim registers a lot and moves its documents to sending; Release records
	// what a send learned and returns how many documents it still held; Note
	// sets the message of documents still held by claim.
	Claim(ctx context.Context, c Claim) error
	Release(ctx context.Context, r Release) (int64, error)
	Note(ctx context.Context, ids []int64, claim, message string, now time.Time) error
	// Hold records a refusal before any claim: documents in draft or error get
	// retryAt, a draft also message (one in error keeps its last answer).
	Hold(ctx context.Context, ids []int64, message string, retryAt, now time.Time) error
	// Fail records a failure before any claim: drafts and errors become "error"
	// with message.
	Fail(ctx context.Context, ids []int64, message string, now time.Time) error
	// Stale returns documents in sending claimed at or before cutoff; SentLots
	// the lots with documents still sent, with their schedule.
	Stale(ctx context.Context, cutoff time.Time) ([]Document, error)
	SentLots(ctx context.Context) ([]LotRef, error)
	// ScheduleLot moves a lot's next query to at if it is due by dueBy, in one
	// conditional write, and reports whether it did: of processes finding it due
	// at once one moves it (docs/decisions/0170). A lot without a row is moved.
	ScheduleLot(ctx context.Context, env Env, lotNumber string, dueBy, at time.Time) (bool, error)
	// LotDocuments returns the documents of a lot still sent.
	LotDocuments(ctx context.Context, env Env, lotNumber string) ([]Document, error)
	// Finish gives a sent document its result unless its version changed (false).
	Finish(ctx context.Context, doc Document, st Settle, now time.Time) (bool, error)
	// ShareInterval stores d as env's interval between lots of a RUC when it is
	// longer than the stored one, and returns the one stored before (0: none).
	ShareInterval(ctx context.Context, env Env, d time.Duration, now time.Time) (time.Duration, error)
}

// LotRef is a queued lot with documents still waiting for its result.
type LotRef struct {
	Env       Env
	LotNumber string
	RUC       string
	// Documents counts its documents still sent; SentAt is when it was queued,
	// NextQueryAt its next query (zero: none stored, due ConsultaInterval after
	// SentAt).
	Documents   int
	SentAt      time.Time
	NextQueryAt time.Time
}

// Claim is DocumentStore.Claim's input: the documents as read (Version),
// the send's token, the lot and its RUC.
type Claim struct {
	Docs  []Document
	Token string
	Lot   packedLot
	Env   Env
	RUC   RUC
	Now   time.Time
}

// Release is DocumentStore.Release's input: the settle of the documents
// still held by Token, and the lot's fate.
type Release struct {
	IDs   []int64
	Token string
	Env   Env
	Hash  string
	St    Settle
	Now   time.Time
}

// Settle is what a send, a lot's result or Resolve learned about documents.
type Settle struct {
	Status       Status
	Message      string
	ResponseCode string
	LotNumber    string
	// Result is dEstRes and AuthNumber dProtAut; Sent sets SentAt; NextQueryAt
	// is a queued lot's first query.
	Result, AuthNumber string
	RetryAt            time.Time
	Sent               bool
	NextQueryAt        time.Time
}
