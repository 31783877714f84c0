package sifen

import (
	"context"
	"time"
)

// SOAPServices are SIFEN's three SOAP services. *Client is the real one; a
// test or an application may bring its own (a recorded exchange, a client
// with its own signing). Implementations are safe for concurrent use.
type SOAPServices interface {
	// RecepcionLote sends a lot (siRecepLoteDE). An error that proves the
	// request never left (a failed dial or TLS check, a *RemoteError of
	// SIFEN's refusal) leaves the documents sendable; any other leaves them
	// in "sending" for Resolve.
	RecepcionLote(ctx context.Context, env Env, zip []byte) (EnvioLoteResponse, error)
	// ConsultaLote asks for a lot's result (siConsLoteDE).
	ConsultaLote(ctx context.Context, env Env, lotNumber string) (ConsultaLoteResponse, error)
	// ConsultaDE asks whether SIFEN has a DE (siConsDE).
	ConsultaDE(ctx context.Context, env Env, cdc string) (ConsultaDEResponse, error)
}

var _ SOAPServices = (*Client)(nil)

// DocumentStore keeps documents and lots, shared by every process that
// sends on one database. (A RUC's gate is not here: it is its
// SIFEN_RECEPCION_LOTE bucket, in the throttle.) Each method is one short
// transaction; none is held across a call to SIFEN. sifen/sifensql is the
// SQL implementation (SQLite and PostgreSQL). Database failures wrap
// throttle.ErrStoreUnavailable; a cancelled context stays itself.
type DocumentStore interface {
	// Import stores des as drafts of env, all or none, and returns their
	// ids in order. A CDC already stored is taken again (the document
	// becomes a draft of the new XML) when Reimportable says so of the
	// stored document (replace: the user asked to replace a draft's
	// content, docs/decisions/0057); otherwise the error is a *CDCError
	// with Now set to now.
	Import(ctx context.Context, env Env, des []DE, replace bool, now time.Time) ([]int64, error)
	// Documents returns the documents ids in id order, with their XML when
	// withXML; ErrNotFound names a missing one.
	Documents(ctx context.Context, ids []int64, withXML bool) ([]Document, error)
	// List runs a Filter (newest first, without XML).
	List(ctx context.Context, f Filter) ([]Document, error)
	// CountByStatus counts documents by status, of env or of both when "".
	CountByStatus(ctx context.Context, env Env) (map[Status]int64, error)
	// Claim registers a lot and moves its documents to sending (see Claim).
	Claim(ctx context.Context, c Claim) error
	// Release records what a send learned (see Release) and returns how
	// many documents it still held.
	Release(ctx context.Context, r Release) (int64, error)
	// Note sets the message of documents still held by claim.
	Note(ctx context.Context, ids []int64, claim, message string, now time.Time) error
	// Hold records a refusal before any claim: documents in draft or error
	// keep their status and get retryAt; a draft gets message, a document
	// in error keeps its own (the answer of its last send, SIFEN's 0301
	// among them): the local refusal is told apart by retryAt.
	Hold(ctx context.Context, ids []int64, message string, retryAt, now time.Time) error
	// Fail records a failure before any claim (the throttle could not
	// decide): documents in draft or error become "error" with message.
	Fail(ctx context.Context, ids []int64, message string, now time.Time) error
	// Stale returns documents in sending claimed at or before cutoff.
	Stale(ctx context.Context, cutoff time.Time) ([]Document, error)
	// SentLots returns the lots that have documents still sent, with
	// their query schedule.
	SentLots(ctx context.Context) ([]LotRef, error)
	// ScheduleLot moves a lot's next query to at if it falls due by dueBy
	// (none stored, or stored at or before dueBy), in one conditional
	// write, and reports whether it did: of processes that find a lot due
	// at once exactly one moves it, and queries it (docs/decisions/0170).
	// A lot the store has no row of is reported moved.
	ScheduleLot(ctx context.Context, env Env, lotNumber string, dueBy, at time.Time) (bool, error)
	// LotDocuments returns the documents of a lot still sent.
	LotDocuments(ctx context.Context, env Env, lotNumber string) ([]Document, error)
	// Finish gives one sent document its result, conditional on its
	// version; false when it had changed.
	Finish(ctx context.Context, doc Document, st Settle, now time.Time) (bool, error)
	// ShareInterval stores d as env's interval between lots of a RUC when
	// it is longer than the stored one (or none is), and returns the one
	// stored before (0: none).
	ShareInterval(ctx context.Context, env Env, d time.Duration, now time.Time) (time.Duration, error)
}

// LotRef names a lot SIFEN queued that has documents still waiting for its
// result, with its query schedule.
type LotRef struct {
	Env       Env
	LotNumber string
	RUC       string
	// Documents counts the lot's documents still sent.
	Documents int
	// SentAt is when the lot was queued.
	SentAt time.Time
	// NextQueryAt is when the lot is to be queried next (zero when the
	// store has no schedule for it: due ConsultaInterval after SentAt).
	NextQueryAt time.Time
}

// Claim is what DocumentStore.Claim needs: the documents as read (their
// Version), the send's token, and the lot and its RUC.
type Claim struct {
	Docs  []Document
	Token string
	Lot   packedLot
	Env   Env
	RUC   RUC
	Now   time.Time
}

// Release is what DocumentStore.Release writes: the settle of the
// documents still held by Token, and the lot's fate.
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
	// Result is dEstRes and AuthNumber dProtAut, from a lot's result.
	Result, AuthNumber string
	RetryAt            time.Time
	// Sent sets the documents' SentAt.
	Sent bool
	// NextQueryAt, for a lot SIFEN queued, is when its result is to be
	// queried first.
	NextQueryAt time.Time
}
