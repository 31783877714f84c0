package dict

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/balde-throttle/balde/throttle"
)

// ClientConfig configures NewClient.
type ClientConfig struct {
	// BaseURL is the DICT's address (https://dict.pi.rsfn.net.br:16422); APIPrefix is added to it.
	BaseURL string
	// Participant is this participant's ISPB (PI-RequestingParticipant).
	Participant string
	// Limiter and Catalog are the local mirror: the Limiter must resolve the
	// Catalog's policies.
	Limiter *throttle.Limiter
	Catalog *Catalog
	// Records, when set, records every lookup (for CreditPayment and the
	// anti-scan monitors) and the category learned.
	Records Records
	// HTTPClient sends the requests (NewTLSClient builds one for mutual TLS):
	// its Transport is the base of a dict.Transport and its Timeout bounds each
	// request, hold to answer. Default: a 30 s timeout.
	HTTPClient *http.Client
	// PoliciesURL is the base URL of GET /policies/ on its own host; default BaseURL.
	PoliciesURL string
	// PaymentNoticeURL, when set, is POSTed ?endToEndId=E2E by CreditPayment
	// before the mirror is credited: a simulator's stand-in for the SPI
	// (dictsim's /sim/payments). Leave it empty with the real DICT.
	PaymentNoticeURL string
	// Signer signs the body of write operations. Without one, writes go
	// unsigned only to a loopback address (a simulator), else fail with ErrUnsigned.
	Signer Signer
	// Verifier, when set, checks the signature of every answer with the
	// expected status before it is decoded; a bad one is the operation's
	// error, wrapping ErrSignatureInvalid (the mirror was settled all the same).
	Verifier Verifier
	// CategoryRecheck is how often a getEntry first re-checks the
	// participant's category (see recheckCategory). Default
	// defaultCategoryRecheck; negative: never.
	CategoryRecheck time.Duration
	// Logger receives the client's logs; nil logs nowhere.
	Logger *slog.Logger
}

// nowhere logs nothing.
var nowhere = slog.New(slog.DiscardHandler)

// defaultCategoryRecheck is the refill period of the categorised participant
// policy, so that every process follows a new category within one period.
const defaultCategoryRecheck = time.Minute

// Signer signs a write operation's XML body with the PSP's key (XMLDSig).
type Signer interface {
	Sign(ctx context.Context, op string, body []byte) ([]byte, error)
}

// Client calls the DICT API for one participant through a Transport, which
// holds, refuses, settles and handles remote 429s. Safe for concurrent use.
type Client struct {
	api         string // the base URL and APIPrefix, e.g. https://dict.pi.rsfn.net.br:16422/api/v2
	participant string
	signer      Signer
	verifier    Verifier
	notice      string
	meter       Meter
	transport   *Transport    // with the client's Meter, Participant, PoliciesURL, Records and Logger
	timeout     time.Duration // of one request, hold to answer (HTTPClient.Timeout)

	recheck   time.Duration
	checkMu   sync.Mutex // held by the category check in progress
	checkedAt time.Time  // the last category check (or NewClient), under checkMu
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
	api, err := apiBase(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("dict: client base URL: %w", err)
	}
	hc := http.Client{Timeout: 30 * time.Second}
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	t := &Transport{Base: hc.Transport, Meter: Meter{Limiter: cfg.Limiter, Catalog: cfg.Catalog}, Participant: cfg.Participant,
		Logger: cmp.Or(cfg.Logger, nowhere)}
	c := &Client{
		api:         api,
		participant: cfg.Participant,
		signer:      cfg.Signer,
		verifier:    cfg.Verifier,
		notice:      cfg.PaymentNoticeURL,
		meter:       t.meter(), // with the holds and readings of t
		transport:   t,
		timeout:     hc.Timeout,
		recheck:     cmp.Or(cfg.CategoryRecheck, defaultCategoryRecheck),
		checkedAt:   cfg.Limiter.Now(),
	}
	if cfg.PoliciesURL != "" {
		if t.PoliciesURL, err = apiBase(cfg.PoliciesURL); err != nil {
			return nil, fmt.Errorf("dict: client policies URL: %w", err)
		}
	}
	if !isNil(cfg.Records) { // a nil *dictsql.Records in the interface is none
		c.transport.Records = cfg.Records
	}
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

// apiBase parses the http(s) base URL of the DICT's API and returns it
// ending in its API prefix (APIPrefix when it has none).
func apiBase(s string) (string, error) {
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", s)
	}
	if !apiPrefix.MatchString(u.Path) {
		u.Path += APIPrefix
	}
	return u.String(), nil
}

// IsLoopbackURL reports whether the URL s points at a loopback address (a
// simulator's): a write goes unsigned only there, and dictsetup notices the
// simulator's payments.
func IsLoopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	ip := net.ParseIP(u.Hostname())
	return u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()
}

// Participant returns the client's ISPB.
func (c *Client) Participant() string { return c.participant }

// Catalog returns the client's catalog.
func (c *Client) Catalog() *Catalog { return c.meter.Catalog }

// Meter returns the client's meter (its Limiter and Catalog).
func (c *Client) Meter() Meter { return c.meter }

// LookupRequest is one getEntry.
type LookupRequest struct {
	Key     string // the Pix key, its type inferred (ParseKey)
	PayerID string // the CPF or CNPJ of the end user who will pay
	// EndToEndID is the EndToEndId of the payment the lookup prepares;
	// empty: the client generates one.
	EndToEndID string
}

// GetEntry looks a key up (GET /api/v2/entries/{Key}), charged to the
// payer's USER anti-scan bucket and the participant's: a 200 costs 1 and 1,
// a 404 20 and 3, a 500 or a 429 nothing. res.EndToEndID is the lookup's,
// given or generated, also with an error.
// Bad input is ErrInvalidKey, ErrInvalidPayerID or ErrInvalidEndToEndID;
// a key with no entry is a *RemoteError whose NotFound() is true.
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
		e2e, _ = NewEndToEndID(c.participant, c.meter.Limiter.Now()) // NewClient validated the participant
	} else if err := ValidateEndToEndID(e2e); err != nil {
		return none, err
	}
	c.recheckCategory(ctx)
	hdr := http.Header{}
	hdr.Set(HeaderPayerID, req.PayerID)
	hdr.Set(HeaderEndToEndID, e2e)
	res, err := send[GetEntryResponse](ctx, c, call{method: http.MethodGet, path: "/entries/" + url.PathEscape(key.Value), header: hdr}, http.StatusOK)
	res.EndToEndID = e2e
	return res, err
}

// Result is the outcome of a Client operation. A refusal of the mirror
// (Decision.Allowed false) comes with a nil error and a nil Response: nothing
// was sent. Response is the DICT's answer on success; EndToEndID a getEntry's.
//
// Errors are failures only (docs/decisions/0010): bad input, before anything
// is taken or sent; ErrUnsigned; *RemoteError for another status than the
// operation's success; throttle.ErrStoreUnavailable when the mirror could
// not decide (nothing sent). A store failure after the answer never hides it.
type Result[T any] struct {
	Decision   throttle.Decision
	Response   *T
	EndToEndID string
}

// call is one request to the DICT: method, the path after APIPrefix
// (segments escaped, with its query if any), and its headers and body.
type call struct {
	method, path string
	header       http.Header
	body         any
}

// send sends cl through the client's Transport within its timeout and
// decodes the answer with status want into res.Response.
func send[T any](ctx context.Context, c *Client, cl call, want int) (res Result[T], err error) {
	// Build the request first: nothing is taken for a request that cannot be built.
	path, _, _ := strings.Cut(cl.path, "?")
	rt, _, _ := MatchRoute(cl.method, APIPrefix+path)
	api := c.api
	if rt.Op == OpListBucketStates || rt.Op == opGetBucketState {
		api = cmp.Or(c.transport.PoliciesURL, c.api)
	}
	var body []byte
	if cl.body != nil {
		if body, err = Marshal(cl.body); err != nil {
			return res, err
		}
	}
	switch {
	case !rt.Write:
	case c.signer != nil:
		if body, err = c.signer.Sign(ctx, rt.Op, body); err != nil {
			return res, fmt.Errorf("dict: %s: sign: %w", rt.Op, err)
		}
	case !IsLoopbackURL(c.api):
		return res, fmt.Errorf("%w: %s to %s", ErrUnsigned, rt.Op, c.api)
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, api+cl.path, bytes.NewReader(body))
	if err != nil {
		return res, fmt.Errorf("dict: %s: %w", rt.Op, err)
	}
	maps.Copy(req.Header, cl.header)
	req.Header.Set(HeaderRequestingParticipant, c.participant)
	req.Header.Set("Accept", ContentTypeXML+", "+ContentTypeProblemXML)
	if body != nil {
		req.Header.Set("Content-Type", ContentTypeXML)
	}
	resp, d, _, err := c.transport.exchange(req)
	if res.Decision = d; err != nil {
		return res, fmt.Errorf("dict: %s: %w", rt.Op, err)
	}
	if !d.Allowed {
		return res, nil
	}
	data, _ := io.ReadAll(resp.Body) // in memory: exchange read it whole
	switch {
	case resp.StatusCode != want:
		e := &RemoteError{Op: rt.Op, Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), c.meter.Limiter.Now())}
		e.Problem, _ = DecodeProblem(data)
		return res, e
	case c.verifier != nil:
		if err := c.verifier.Verify(ctx, rt.Op, data); err != nil {
			return res, err
		}
	}
	if len(data) == 0 {
		return res, fmt.Errorf("%w: %s: empty body", ErrMalformedResponse, rt.Op)
	}
	res.Response = new(T)
	if err := Unmarshal(data, res.Response); err != nil {
		res.Response = nil
		return res, fmt.Errorf("dict: %s: %w", rt.Op, err)
	}
	return res, nil
}

// CheckKeys asks which of 1 to maxCheckKeys keys have an entry
// (POST /api/v2/keys/check), charged to KEYS_CHECK; every key is validated first.
func (c *Client) CheckKeys(ctx context.Context, keys []string) (Result[CheckKeysResponse], error) {
	if len(keys) == 0 || len(keys) > maxCheckKeys {
		return Result[CheckKeysResponse]{}, fmt.Errorf("%w: %d keys to check (1 to %d)", ErrInvalidKey, len(keys), maxCheckKeys)
	}
	for _, k := range keys {
		if _, err := ParseKey(k); err != nil {
			return Result[CheckKeysResponse]{}, err
		}
	}
	return send[CheckKeysResponse](ctx, c, call{method: http.MethodPost, path: "/keys/check", body: &CheckKeysRequest{Keys: keys}}, http.StatusOK)
}

// CreateEntry registers a key (POST /api/v2/entries/, answered 201), charged
// to ENTRIES_WRITE, after validating the key, the account's participant and
// the owner's tax id; an empty RequestID gets a new UUID, an empty Reason
// becomes USER_REQUESTED.
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
	req.RequestID = cmp.Or(req.RequestID, uuid.NewString())
	req.Reason = cmp.Or(req.Reason, "USER_REQUESTED")
	return send[CreateEntryResponse](ctx, c, call{method: http.MethodPost, path: "/entries/", body: &req}, http.StatusCreated)
}

// DeleteEntry removes a key (POST /api/v2/entries/{Key}/delete), charged 1
// token to ENTRIES_WRITE. An empty reason becomes USER_REQUESTED.
func (c *Client) DeleteEntry(ctx context.Context, key, reason string) (Result[DeleteEntryResponse], error) {
	k, err := ParseKey(key)
	if err != nil {
		return Result[DeleteEntryResponse]{}, err
	}
	return send[DeleteEntryResponse](ctx, c, call{method: http.MethodPost, path: "/entries/" + url.PathEscape(k.Value) + "/delete",
		body: &deleteEntryRequest{Key: k.Value, Participant: c.participant, Reason: cmp.Or(reason, "USER_REQUESTED")}}, http.StatusOK)
}

// ClaimsFilter selects claims (listClaims' query). Filtering by role (donor
// or claimer) charges CLAIMS_LIST_WITH_ROLE, no role CLAIMS_LIST_WITHOUT_ROLE.
type ClaimsFilter struct {
	IsDonor                     bool
	IsClaimer                   bool
	IncludeIndirectParticipants bool // the indirect participants' claims too
	// Status and Type keep claims in one of these (OPEN, WAITING_RESOLUTION,
	// CONFIRMED, CANCELLED, COMPLETED; OWNERSHIP, PORTABILITY); empty: all.
	Status                        []string
	Type                          string
	ModifiedAfter, ModifiedBefore time.Time // bounds of LastModified (zero: unbounded)
	Limit                         int       // of the claims returned (0: the DICT's default)
}

// ListClaims lists claims of the participant (GET /api/v2/claims/).
func (c *Client) ListClaims(ctx context.Context, f ClaimsFilter) (Result[ListClaimsResponse], error) {
	q := url.Values{"Participant": {c.participant}, "Status": f.Status}
	set := func(name string, on bool, value string) {
		if on {
			q.Set(name, value)
		}
	}
	set("IncludeIndirectParticipants", f.IncludeIndirectParticipants, "true")
	set("IsDonor", f.IsDonor, "true")
	set("IsClaimer", f.IsClaimer, "true")
	set("Type", f.Type != "", f.Type)
	set("ModifiedAfter", !f.ModifiedAfter.IsZero(), formatTimestamp(f.ModifiedAfter))
	set("ModifiedBefore", !f.ModifiedBefore.IsZero(), formatTimestamp(f.ModifiedBefore))
	set("Limit", f.Limit > 0, strconv.Itoa(f.Limit))
	return send[ListClaimsResponse](ctx, c, call{method: http.MethodGet, path: "/claims/?" + q.Encode()}, http.StatusOK)
}

// GetBucketState reads one of the participant's buckets at the DICT
// (GET /api/v2/policies/{policy}), charged to POLICIES_READ; a bad name is throttle.ErrInvalidKey.
func (c *Client) GetBucketState(ctx context.Context, policy string) (Result[GetPolicyResponse], error) {
	if err := c.meter.Catalog.Key(policy, c.participant).Validate(); err != nil {
		return Result[GetPolicyResponse]{}, err
	}
	return send[GetPolicyResponse](ctx, c, call{method: http.MethodGet, path: "/policies/" + url.PathEscape(policy)}, http.StatusOK)
}

// ListBucketStates reads all of the participant's buckets at the DICT and
// its category (GET /api/v2/policies/), charged 1 token to POLICIES_LIST.
func (c *Client) ListBucketStates(ctx context.Context) (Result[ListPoliciesResponse], error) {
	return send[ListPoliciesResponse](ctx, c, call{method: http.MethodGet, path: "/policies/"}, http.StatusOK)
}

// PaymentCredit is the result of CreditPayment.
type PaymentCredit struct {
	Lookup    Lookup
	Adjusted  []throttle.Adjusted // the payer's bucket then the participant's
	Duplicate bool                // the payment was already credited: nothing changed
}

// CreditPayment credits a payment order (pacs.008) sent with the EndToEndId
// of an earlier lookup that found its key, as the DICT does: +1 (PF) or +2
// (PJ) to the payer's bucket and +1 to the participant's, capped at
// capacity, once per EndToEndId. On error the PaymentCredit holds at most the lookup.
//
// Errors: ErrInvalidEndToEndID; an error when the client has no Records;
// ErrUnknownEndToEndID; ErrNotPayable for a lookup that did not end in 200.
func (c *Client) CreditPayment(ctx context.Context, endToEndID string) (PaymentCredit, error) {
	if err := ValidateEndToEndID(endToEndID); err != nil {
		return PaymentCredit{}, err
	}
	if c.transport.Records == nil {
		return PaymentCredit{}, errNoRecords
	}
	l, err := c.transport.Records.FindLookup(ctx, endToEndID)
	if err != nil {
		return PaymentCredit{}, err
	}
	pc, m := PaymentCredit{Lookup: l}, c.meter
	switch {
	case l.Status != http.StatusOK:
		return pc, fmt.Errorf("%w: %s ended in %d", ErrNotPayable, l.EndToEndID, l.Status)
	case l.Env != m.Catalog.Env():
		return pc, fmt.Errorf("%w: %s was looked up in env %q, not %q", ErrUnknownEndToEndID, l.EndToEndID, l.Env, m.Catalog.Env())
	}
	if c.notice != "" {
		if err := c.noticePayment(ctx, endToEndID); err != nil {
			return pc, err
		}
	}
	adjusted, err := m.credit(ctx, l.EndToEndID, EventPayment,
		m.Catalog.Key(l.Policy, l.PayerID), m.Catalog.Key(PolicyEntriesReadParticipantAntiscan, l.Participant))
	if err == nil {
		err = c.transport.Records.MarkPaid(ctx, l.EndToEndID, m.Limiter.Now())
	}
	if err != nil {
		return pc, err
	}
	pc.Adjusted = adjusted
	pc.Duplicate = !slices.ContainsFunc(adjusted, func(a throttle.Adjusted) bool { return !a.Duplicate })
	return pc, nil
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
