package dict

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/balde-throttle/balde/throttle"
)

// ClientConfig configures NewClient.
type ClientConfig struct {
	// BaseURL is the DICT's address, e.g. https://dict.pi.rsfn.net.br:16522
	// (APIPrefix is added to it).
	BaseURL string
	// Participant is this participant's ISPB (PI-RequestingParticipant).
	Participant string
	// Limiter and Catalog are the local mirror: the Limiter must resolve the
	// Catalog's policies.
	Limiter *throttle.Limiter
	Catalog *Catalog
	// Records, when set, records every lookup (needed by CreditPayment and
	// the anti-scan monitors) and the category Reconcile learns.
	Records Records
	// HTTPClient sends the requests; NewTLSClient builds one for mutual TLS.
	// Its Transport is the base of a dict.Transport (the one send path) and
	// its Timeout bounds each request, from the hold to the answer read.
	// Default: a client with a 30 s timeout.
	HTTPClient *http.Client
	// PoliciesURL is the base URL of GET /policies/ when it lives on its own
	// host (dict-ratelimit… in the public spec); default BaseURL.
	PoliciesURL string
	// PaymentNoticeURL, when set, is POSTed ?endToEndId=E2E by
	// CreditPayment before the mirror is credited: a simulator's stand-in
	// for the SPI seeing the payment order (dictsim's /sim/payments), so
	// that both sides credit the payment. The real DICT learns of payments
	// from the SPI: leave it empty.
	PaymentNoticeURL string
	// Signer signs the body of write operations (XMLDSig with the PSP's
	// key; balde holds no key). Without one, writes are sent unsigned only
	// to a loopback address (a simulator) and refused otherwise
	// (ErrUnsigned).
	Signer Signer
	// Verifier, when set, checks the signature of every answer with the
	// expected status before it is decoded (XMLVerifier: the DICT signs its
	// answers and clients must validate them). A bad signature is the
	// operation's error, wrapping ErrSignatureInvalid; the mirror was
	// settled by the status all the same.
	Verifier Verifier
	// CategoryRecheck is how often the client re-checks the participant's
	// category while it runs (before a getEntry, at most once per period):
	// the category another process recorded in Records within the period,
	// else the DICT's answer to GET /policies/ENTRIES_READ_PARTICIPANT_ANTISCAN
	// (one POLICIES_READ token), which also syncs that bucket. Default
	// defaultCategoryRecheck; negative: never.
	CategoryRecheck time.Duration
	// Logger receives the client's logs; nil logs nowhere.
	Logger *slog.Logger
}

// nowhere is the logger of a part built without one: it logs nothing.
var nowhere = slog.New(slog.DiscardHandler)

// defaultCategoryRecheck is ClientConfig.CategoryRecheck's default: the
// refill period of the categorised participant policy, so that a category
// the DICT changes is followed within one period by every process.
const defaultCategoryRecheck = time.Minute

// Signer signs a write operation's XML body with the PSP's key (XMLDSig,
// the Signature element) and returns the signed document.
type Signer interface {
	Sign(ctx context.Context, op string, body []byte) ([]byte, error)
}

// Client calls the DICT API for one participant through a Transport: before
// every request it holds the worst-case cost in the local mirror and
// refuses locally (nothing is sent) when a bucket is not positive; after
// the response it refunds the difference by status; on a remote 429 it
// lowers only the bucket the DICT says is empty (see Transport) for the
// remote Retry-After. Safe for concurrent use.
type Client struct {
	api         string // the base URL and APIPrefix, e.g. https://dict.pi.rsfn.net.br:16522/api/v2
	policiesAPI string // the base of GET /policies/
	participant string
	signer      Signer
	verifier    Verifier
	loopback    bool
	notice      string
	meter       Meter
	catalog     *Catalog
	records     Records
	transport   *Transport
	timeout     time.Duration // of one request, hold to answer (HTTPClient.Timeout)
	logger      *slog.Logger

	recheck    time.Duration
	categoryMu sync.Mutex
	checkedAt  time.Time // the last category check (or NewClient)
	checking   bool
}

// NewClient returns a Client. The error wraps ErrInvalidISPB for a bad
// participant, or says which field is missing.
func NewClient(cfg ClientConfig) (*Client, error) {
	if err := ValidateISPB(cfg.Participant); err != nil {
		return nil, fmt.Errorf("dict: client participant: %w", err)
	}
	if cfg.Limiter == nil || cfg.Catalog == nil {
		return nil, errors.New("dict: client needs a Limiter and a Catalog")
	}
	base, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(cfg.BaseURL, "/"), APIPrefix))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("dict: client base URL %q is not an http(s) URL", cfg.BaseURL)
	}
	c := &Client{
		api:         strings.TrimSuffix(base.String(), "/") + APIPrefix,
		participant: cfg.Participant,
		signer:      cfg.Signer,
		verifier:    cfg.Verifier,
		loopback:    isLoopback(base.Hostname()),
		notice:      cfg.PaymentNoticeURL,
		meter:       Meter{Limiter: cfg.Limiter, Catalog: cfg.Catalog, holds: &holds{}},
		catalog:     cfg.Catalog,
		records:     cfg.Records,
		logger:      cfg.Logger,
		recheck:     cfg.CategoryRecheck,
		checkedAt:   cfg.Limiter.Now(),
	}
	if c.recheck == 0 {
		c.recheck = defaultCategoryRecheck
	}
	c.policiesAPI = c.api
	if cfg.PoliciesURL != "" {
		pu, err := url.Parse(strings.TrimSuffix(cfg.PoliciesURL, "/"))
		if err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			return nil, fmt.Errorf("dict: client policies URL %q is not an http(s) URL", cfg.PoliciesURL)
		}
		if !apiPrefix.MatchString(pu.Path) {
			pu.Path += APIPrefix
		}
		c.policiesAPI = pu.String()
	}
	if c.logger == nil {
		c.logger = nowhere
	}
	hc := http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	t := &Transport{Base: hc.Transport, Meter: c.meter, Participant: c.participant, Logger: c.logger}
	if cfg.PoliciesURL != "" {
		t.PoliciesURL = c.policiesAPI
	}
	if isNil(cfg.Records) {
		// A nil *dictsql.Records in the interface is no records.
		cfg.Records, c.records = nil, nil
	}
	if cfg.Records != nil {
		t.Records = cfg.Records
	}
	c.transport, c.timeout = t, hc.Timeout
	return c, nil
}

// isNil reports whether v is nil or holds a nil pointer.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// isLoopback reports whether host is a loopback address (where the
// simulators listen).
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Participant returns the client's ISPB.
func (c *Client) Participant() string { return c.participant }

// Catalog returns the client's catalog.
func (c *Client) Catalog() *Catalog { return c.catalog }

// Meter returns the client's meter (its Limiter and Catalog).
func (c *Client) Meter() Meter { return c.meter }

// LookupRequest is one getEntry.
type LookupRequest struct {
	// Key is the Pix key looked up; its type is inferred (ParseKey).
	Key string
	// PayerID is the CPF or CNPJ of the end user who will pay.
	PayerID string
	// EndToEndID is the EndToEndId of the payment the lookup prepares;
	// empty: the client generates one (NewEndToEndID).
	EndToEndID string
}

// GetEntry looks a key up (GET /api/v2/entries/{Key}), charged to the
// payer's USER anti-scan bucket and the participant's
// ENTRIES_READ_PARTICIPANT_ANTISCAN bucket: admitted while both are
// positive, holding the worst case (20 and 3) until the answer; then a 200
// costs 1 and 1, a 404 20 and 3, a 500 or a 429 nothing (the difference is
// refunded).
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. res.EndToEndID is the lookup's, given or generated.
//
// Errors: ErrInvalidKey, ErrInvalidPayerID, ErrInvalidEndToEndID (nothing
// taken or sent); *RemoteError for any status but 200 (NotFound() for a key
// with no entry) — the result still carries the EndToEndId;
// throttle.ErrStoreUnavailable when the mirror could not decide (nothing
// sent). A store failure after the answer never hides it (see Transport).
func (c *Client) GetEntry(ctx context.Context, req LookupRequest) (Result[GetEntryResponse], error) {
	var none Result[GetEntryResponse]
	key, err := ParseKey(req.Key)
	if err != nil {
		return none, err
	}
	if _, err := parsePayerID(req.PayerID); err != nil {
		return none, err
	}
	e2e := req.EndToEndID
	if e2e == "" {
		if e2e, err = NewEndToEndID(c.participant, c.meter.Limiter.Now()); err != nil {
			return none, err
		}
	} else if err := ValidateEndToEndID(e2e); err != nil {
		return none, err
	}
	c.recheckCategory(ctx)
	hdr := http.Header{}
	hdr.Set(HeaderPayerID, req.PayerID)
	hdr.Set(HeaderEndToEndID, e2e)
	res, err := send[GetEntryResponse](ctx, c, call{
		op: OpGetEntry, method: http.MethodGet, path: "/entries/" + url.PathEscape(key.Value), header: hdr,
	}, http.StatusOK)
	res.EndToEndID = e2e
	return res, err
}

// Result is the outcome of a DICT operation. Decision is the mirror's: a
// refusal (Allowed false, with its Key, Reason and RetryAfter) comes with a
// nil error and a nil Response, and means nothing was sent. Response is the
// DICT's answer when it succeeded; EndToEndID is a getEntry's. Errors are
// failures only (docs/decisions/0010).
type Result[T any] struct {
	Decision   throttle.Decision
	Response   *T
	EndToEndID string
}

// send sends cl and decodes the DICT's answer with status want into
// res.Response; a refusal of the mirror is res.Decision with a nil error.
func send[T any](ctx context.Context, c *Client, cl call, want int) (Result[T], error) {
	resp, d, err := c.do(ctx, cl)
	res := Result[T]{Decision: d}
	if err != nil || !d.Allowed {
		return res, err
	}
	body, _ := io.ReadAll(resp.Body) // in memory: exchange read it whole
	if resp.StatusCode != want {
		e := &RemoteError{Op: cl.op, Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), c.meter.Limiter.Now())}
		e.Problem, _ = DecodeProblem(body)
		return res, e
	}
	if c.verifier != nil {
		if err := c.verifier.Verify(ctx, cl.op, body); err != nil {
			return res, err
		}
	}
	if len(body) == 0 {
		return res, fmt.Errorf("%w: %s: %w", ErrMalformedResponse, cl.op, errNoBody)
	}
	var out T
	if err := Unmarshal(body, &out); err != nil {
		return res, fmt.Errorf("dict: %s: %w", cl.op, err)
	}
	res.Response = &out
	return res, nil
}

// CheckKeys asks which of 1 to maxCheckKeys keys have an entry
// (POST /api/v2/keys/check), charged 1 token to KEYS_CHECK. Every key is
// validated first.
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. Errors: ErrInvalidKey and the key errors of ParseKey
// (nothing taken or sent); *RemoteError for any status but 200;
// throttle.ErrStoreUnavailable when the mirror could not decide.
func (c *Client) CheckKeys(ctx context.Context, keys []string) (Result[CheckKeysResponse], error) {
	if len(keys) == 0 || len(keys) > maxCheckKeys {
		return Result[CheckKeysResponse]{}, fmt.Errorf("%w: %d keys to check (1 to %d)", ErrInvalidKey, len(keys), maxCheckKeys)
	}
	for _, k := range keys {
		if _, err := ParseKey(k); err != nil {
			return Result[CheckKeysResponse]{}, err
		}
	}
	body, err := Marshal(&CheckKeysRequest{Keys: keys})
	if err != nil {
		return Result[CheckKeysResponse]{}, err
	}
	return send[CheckKeysResponse](ctx, c, call{op: opCheckKeys, method: http.MethodPost, path: "/keys/check", body: body}, http.StatusOK)
}

// CreateEntry registers a key (POST /api/v2/entries/), charged 1 token to
// ENTRIES_WRITE. The key, its type, the account's participant and the
// owner's tax id are validated first; an empty RequestID gets a new UUID
// and an empty Reason becomes USER_REQUESTED. The answer is a 201.
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. Errors: bad input (nothing taken or sent), ErrUnsigned,
// *RemoteError for any status but 201, throttle.ErrStoreUnavailable.
func (c *Client) CreateEntry(ctx context.Context, req CreateEntryRequest) (Result[CreateEntryResponse], error) {
	var none Result[CreateEntryResponse]
	if _, err := parseKeyAs(req.Entry.KeyType, req.Entry.Key); err != nil {
		return none, err
	}
	if err := ValidateISPB(req.Entry.Account.Participant); err != nil {
		return none, err
	}
	if _, err := parsePayerID(req.Entry.Owner.TaxIDNumber); err != nil {
		return none, fmt.Errorf("dict: owner tax id: %w", err)
	}
	if req.RequestID == "" {
		req.RequestID = uuid.NewString()
	}
	if req.Reason == "" {
		req.Reason = "USER_REQUESTED"
	}
	body, err := Marshal(&req)
	if err != nil {
		return none, err
	}
	return send[CreateEntryResponse](ctx, c, call{op: opCreateEntry, method: http.MethodPost, path: "/entries/", body: body}, http.StatusCreated)
}

// DeleteEntry removes a key (POST /api/v2/entries/{Key}/delete), charged 1
// token to ENTRIES_WRITE. An empty reason becomes USER_REQUESTED.
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. Errors: the key errors of ParseKey (nothing taken or
// sent), ErrUnsigned, *RemoteError for any status but 200,
// throttle.ErrStoreUnavailable.
func (c *Client) DeleteEntry(ctx context.Context, key, reason string) (Result[DeleteEntryResponse], error) {
	k, err := ParseKey(key)
	if err != nil {
		return Result[DeleteEntryResponse]{}, err
	}
	if reason == "" {
		reason = "USER_REQUESTED"
	}
	body, err := Marshal(&DeleteEntryRequest{Key: k.Value, Participant: c.participant, Reason: reason})
	if err != nil {
		return Result[DeleteEntryResponse]{}, err
	}
	return send[DeleteEntryResponse](ctx, c, call{op: opDeleteEntry, method: http.MethodPost,
		path: "/entries/" + url.PathEscape(k.Value) + "/delete", body: body}, http.StatusOK)
}

// ClaimsFilter selects claims (listClaims' query, OpenAPI 1.8.0): what the
// spec's polling needs. Filtering by role (donor or claimer) charges
// CLAIMS_LIST_WITH_ROLE, no role CLAIMS_LIST_WITHOUT_ROLE.
type ClaimsFilter struct {
	IsDonor   bool
	IsClaimer bool
	// IncludeIndirectParticipants lists the claims of the participant's
	// indirect participants too.
	IncludeIndirectParticipants bool
	// Status and Type keep claims in one of these (OPEN, WAITING_RESOLUTION,
	// CONFIRMED, CANCELLED, COMPLETED; OWNERSHIP, PORTABILITY); empty: all.
	Status []string
	Type   string
	// ModifiedAfter and ModifiedBefore bound LastModified (zero: unbounded).
	ModifiedAfter, ModifiedBefore time.Time
	// Limit bounds the claims returned (0: the DICT's default).
	Limit int
}

// ListClaims lists claims of the participant (GET /api/v2/claims/).
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. Errors: *RemoteError for any status but 200,
// throttle.ErrStoreUnavailable.
func (c *Client) ListClaims(ctx context.Context, f ClaimsFilter) (Result[ListClaimsResponse], error) {
	q := url.Values{}
	q.Set("Participant", c.participant)
	if f.IncludeIndirectParticipants {
		q.Set("IncludeIndirectParticipants", "true")
	}
	if f.IsDonor {
		q.Set("IsDonor", "true")
	}
	if f.IsClaimer {
		q.Set("IsClaimer", "true")
	}
	for _, st := range f.Status {
		q.Add("Status", st)
	}
	if f.Type != "" {
		q.Set("Type", f.Type)
	}
	if !f.ModifiedAfter.IsZero() {
		q.Set("ModifiedAfter", formatTimestamp(f.ModifiedAfter))
	}
	if !f.ModifiedBefore.IsZero() {
		q.Set("ModifiedBefore", formatTimestamp(f.ModifiedBefore))
	}
	if f.Limit > 0 {
		q.Set("Limit", strconv.Itoa(f.Limit))
	}
	return send[ListClaimsResponse](ctx, c, call{op: opListClaims, method: http.MethodGet, path: "/claims/", query: q}, http.StatusOK)
}

// GetBucketState reads one of the participant's buckets at the DICT
// (GET /api/v2/policies/{policy}), charged 1 token to POLICIES_READ.
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. Errors: throttle.ErrInvalidKey for a bad policy name
// (nothing sent), *RemoteError for any status but 200,
// throttle.ErrStoreUnavailable.
func (c *Client) GetBucketState(ctx context.Context, policy string) (Result[GetPolicyResponse], error) {
	if err := (throttle.Key{Policy: policy, Env: c.catalog.Env(), Identifier: c.participant}).Validate(); err != nil {
		return Result[GetPolicyResponse]{}, err
	}
	return send[GetPolicyResponse](ctx, c, call{op: opGetBucketState, method: http.MethodGet, path: "/policies/" + url.PathEscape(policy)}, http.StatusOK)
}

// ListBucketStates reads all of the participant's buckets at the DICT and
// its category (GET /api/v2/policies/), charged 1 token to POLICIES_LIST
// (6/min, capacity 20).
//
// A refusal of the mirror is res.Decision (Allowed false) with a nil error:
// nothing was sent. Errors: *RemoteError for any status but 200,
// throttle.ErrStoreUnavailable.
func (c *Client) ListBucketStates(ctx context.Context) (Result[ListPoliciesResponse], error) {
	return send[ListPoliciesResponse](ctx, c, call{op: OpListBucketStates, method: http.MethodGet, path: "/policies/"}, http.StatusOK)
}

// PaymentCredit is the result of CreditPayment (and creditLookup).
type PaymentCredit struct {
	Lookup Lookup
	// Adjusted has the payer's bucket then the participant's.
	Adjusted []throttle.Adjusted
	// Duplicate is set when the payment was already credited: nothing changed.
	Duplicate bool
}

// CreditPayment credits a payment order (pacs.008) sent with the EndToEndId
// of an earlier lookup that found its key: +1 (PF) or +2 (PJ) to the payer's
// bucket and +1 to the participant's, capped at capacity, once per
// EndToEndId. The DICT credits its own buckets when the SPI sees the
// payment; this keeps the mirror in step.
//
// Errors: ErrInvalidEndToEndID; errNoRecords; ErrUnknownEndToEndID;
// ErrNotPayable for a lookup that did not end in 200.
func (c *Client) CreditPayment(ctx context.Context, endToEndID string) (PaymentCredit, error) {
	if err := ValidateEndToEndID(endToEndID); err != nil {
		return PaymentCredit{}, err
	}
	if c.records == nil {
		return PaymentCredit{}, errNoRecords
	}
	l, err := c.records.FindLookup(ctx, endToEndID)
	if err != nil {
		return PaymentCredit{}, err
	}
	if c.notice != "" && l.Status == http.StatusOK {
		if err := c.noticePayment(ctx, endToEndID); err != nil {
			return PaymentCredit{Lookup: l}, err
		}
	}
	return creditLookup(ctx, c.meter, c.records, l)
}

// noticePayment tells the simulator the payment order was sent.
func (c *Client) noticePayment(ctx context.Context, e2e string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.notice+"?endToEndId="+url.QueryEscape(e2e), nil)
	if err != nil {
		return fmt.Errorf("dict: payment notice: %w", err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("dict: payment notice: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("dict: payment notice: %s answered %d", c.notice, resp.StatusCode)
	}
	return nil
}

// creditLookup credits the payment of lookup l to the buckets it was
// charged to and marks it paid (see Client.CreditPayment), in the local
// mirror only (the simulator credits its own buckets on /sim/payments). On
// error the PaymentCredit holds only l.
func creditLookup(ctx context.Context, m Meter, records Records, l Lookup) (PaymentCredit, error) {
	pc := PaymentCredit{Lookup: l}
	if l.Status != http.StatusOK {
		return pc, fmt.Errorf("%w: %s ended in %d", ErrNotPayable, l.EndToEndID, l.Status)
	}
	if l.Env != m.Catalog.Env() {
		return pc, fmt.Errorf("%w: %s was looked up in env %q, not %q", ErrUnknownEndToEndID, l.EndToEndID, l.Env, m.Catalog.Env())
	}
	adjusted, err := m.credit(ctx, l.EndToEndID, eventPayment,
		m.Catalog.Key(l.Policy, l.PayerID), m.Catalog.Key(PolicyEntriesReadParticipantAntiscan, l.Participant))
	if err != nil {
		return pc, err
	}
	if err := records.MarkPaid(ctx, l.EndToEndID, m.Limiter.Now()); err != nil {
		return pc, err
	}
	pc.Adjusted, pc.Duplicate = adjusted, true
	for _, a := range adjusted {
		pc.Duplicate = pc.Duplicate && a.Duplicate
	}
	return pc, nil
}

// call is one request to the DICT.
type call struct {
	op     string
	method string
	path   string // after APIPrefix, segments escaped (url.PathEscape)
	query  url.Values
	header http.Header
	body   []byte
}

// do sends one call through the client's Transport (hold, send, settle,
// 429 sync, record) within the client's timeout. It returns the mirror's
// Decision with the DICT's answer (its body in memory); a refusal is a
// Decision not Allowed with a nil response and a nil error: nothing was
// sent. An error means the request could not be built, decided or sent.
func (c *Client) do(ctx context.Context, cl call) (*http.Response, throttle.Decision, error) {
	// Build the request first: nothing is taken for a request that cannot be built.
	api := c.api
	if cl.op == OpListBucketStates || cl.op == opGetBucketState {
		api = c.policiesAPI
	}
	target := api + cl.path
	if len(cl.query) > 0 {
		target += "?" + cl.query.Encode()
	}
	body := cl.body
	if rt, _, ok := MatchRoute(cl.method, APIPrefix+cl.path); ok && rt.Write {
		switch {
		case c.signer != nil:
			signed, err := c.signer.Sign(ctx, cl.op, body)
			if err != nil {
				return nil, throttle.Decision{}, fmt.Errorf("dict: %s: sign: %w", cl.op, err)
			}
			body = signed
		case !c.loopback:
			return nil, throttle.Decision{}, fmt.Errorf("%w: %s to %s", ErrUnsigned, cl.op, c.api)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, target, rd)
	if err != nil {
		return nil, throttle.Decision{}, fmt.Errorf("dict: %s: %w", cl.op, err)
	}
	for k, vs := range cl.header {
		req.Header[k] = vs
	}
	req.Header.Set(HeaderRequestingParticipant, c.participant)
	req.Header.Set("Accept", ContentTypeXML+", "+ContentTypeProblemXML)
	if body != nil {
		req.Header.Set("Content-Type", ContentTypeXML)
	}
	resp, d, _, err := c.transport.exchange(req)
	if err != nil {
		return nil, d, fmt.Errorf("dict: %s: %w", cl.op, err)
	}
	return resp, d, nil
}
