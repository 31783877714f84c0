package dict

import (
	"bytes"
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// maxRetryAfter bounds the wait a remote Retry-After imposes on the mirror.
const maxRetryAfter = 24 * time.Hour

// Transport is an http.RoundTripper that throttles a PSP's own DICT client
// with balde's mirror: it maps each request to its operation and policies
// (Routes), holds the worst-case cost before sending (the payer from
// PI-PayerId), settles by the response's status, handles a remote 429 (see
// settleAfter429), and records getEntry lookups for payment credits.
//
// A request the mirror refuses is not sent: RoundTrip returns a
// *throttle.RefusedError carrying the Decision (docs/decisions/0130). A
// request that is no DICT operation, or whose key or payer is malformed, is
// an error and is not sent. A request that provably never left gets its hold
// back at once; one whose answer was lost keeps it (decision 0015). The
// response is returned whatever its status, its body read and replaced (at
// most MaxBodySize bytes). Safe for concurrent use; do not copy after first use.
type Transport struct {
	Base http.RoundTripper // the PSP's own transport (default http.DefaultTransport)
	// Meter is the local mirror; the Transport counts the holds in flight
	// itself unless it shares a Client's (Client.Meter).
	Meter Meter
	// Participant is the ISPB charged when a request has no
	// PI-RequestingParticipant header (which is then set).
	Participant string
	// Records, when set (not nil, nor a nil pointer), keeps every getEntry
	// the DICT answered and every category the DICT reports.
	Records Records
	// PoliciesURL is the base URL of GET /policies/ on its own host; default
	// the request's own base URL.
	PoliciesURL string
	// Reconcile, when set, lowers the mirror to every 200 answer of
	// GET /policies/ and /policies/{policy} that passes, as Client.Reconcile
	// does (decision 0067): a gateway's clients reconcile it.
	Reconcile bool
	// Logger receives the Transport's logs; nil logs nowhere.
	Logger *slog.Logger

	holdsOnce sync.Once
	holds     *holds
	readings  *readings
	syncMu    sync.Mutex // see settleAfter429
}

var _ http.RoundTripper = (*Transport)(nil)

// meter returns t.Meter with its holds and readings, the Transport's own
// when the Meter has none (a Meter from Client.Meter shares the client's).
func (t *Transport) meter() Meter {
	m := t.Meter
	t.holdsOnce.Do(func() {
		t.holds = &holds{held: map[throttle.Key]int64{}, watches: map[*watch]struct{}{}}
		t.readings = &readings{busy: map[string]*reading{}}
	})
	m.holds, m.readings = cmp.Or(m.holds, t.holds), cmp.Or(m.readings, t.readings)
	return m
}

// RoundTrip implements http.RoundTripper; a refusal is a *throttle.RefusedError.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, d, op, err := t.exchange(req)
	if err == nil && !d.Allowed {
		return nil, &throttle.RefusedError{Op: "dict " + op, Decision: d}
	}
	return resp, err
}

// exchange sends req through the mirror: validate, hold, send, settle. A
// refusal is d with Allowed false, a nil response and a nil error: nothing
// was sent. The response's body is read whole; op is the request's operation.
func (t *Transport) exchange(req *http.Request) (resp *http.Response, d throttle.Decision, op string, err error) {
	m := t.meter()
	sent := false // the base transport closes the body of a request it sends
	defer func() {
		if !sent && req.Body != nil {
			req.Body.Close()
		}
	}()
	rt, params, ok := MatchRoute(req.Method, req.URL.Path)
	if !ok {
		return nil, d, "", fmt.Errorf("dict: %s %s is not a DICT operation: not sent", req.Method, req.URL.Path)
	}
	op = rt.Op
	policiesOp := op == OpListBucketStates || op == opGetBucketState
	var held *watch
	if t.Reconcile && policiesOp {
		// The DICT's balances may or may not count the requests on the
		// wire meanwhile (it charges as it answers).
		held = m.holds.watch()
		defer held.stop()
	}
	participant := req.Header.Get(HeaderRequestingParticipant)
	if participant == "" {
		participant = t.Participant
		req = req.Clone(req.Context())
		req.Header.Set(HeaderRequestingParticipant, participant)
	}
	if err := ValidateISPB(participant); err != nil {
		return nil, d, op, fmt.Errorf("dict: %s: %s: %w", rt.Op, HeaderRequestingParticipant, err)
	}
	keys, err := m.Catalog.requestKeys(rt, params, req.Header, req.URL.Query(), participant)
	if err != nil {
		return nil, d, op, fmt.Errorf("dict: %s: %w", rt.Op, err)
	}
	ref := req.Header.Get(HeaderEndToEndID)
	if err := ValidateEndToEndID(ref); rt.Op == OpGetEntry && err != nil {
		return nil, d, op, fmt.Errorf("dict: %s: %s: %w", rt.Op, HeaderEndToEndID, err)
	}

	rctx, stopReserve := reserveContext(req.Context())
	r, err := t.hold(rctx, m, rt.Op, ref, participant, keys)
	stopReserve()
	if err != nil {
		return nil, d, op, err
	}
	if d = r.Decision; !d.Allowed {
		return nil, d, op, nil
	}
	// From here the reservation is settled whatever happens to req's context.
	ctx := context.WithoutCancel(req.Context())
	sentAt := m.Limiter.Now()
	if err = req.Context().Err(); err == nil { // else the take committed after the deadline
		sent = true
		resp, err = cmp.Or(t.Base, http.DefaultTransport).RoundTrip(req)
	}
	var arrival uint64 // a 429's number among those the readings attribute
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		arrival = m.readings.seen.Add(1)
	}
	if err != nil {
		if !sent || notSent(err) {
			t.settle(ctx, m, r, outcomeNotSent)
			return nil, d, op, fmt.Errorf("dict: %s: not sent, the hold is refunded: %w", rt.Op, err)
		}
		// The hold stays: the DICT may have counted the request at its worst.
		r.landed()
		return nil, d, op, err
	}
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxBodySize+1))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if rerr != nil {
		t.settle(ctx, m, r, outcomeTransportError)
		return nil, d, op, fmt.Errorf("dict: %s: read body: %w", rt.Op, rerr)
	}

	if resp.StatusCode == http.StatusTooManyRequests {
		t.settleAfter429(ctx, m, r, req, rt, keys, resp, data, participant, arrival)
	} else {
		t.settle(ctx, m, r, outcomeOf(resp.StatusCode))
	}
	if resp.StatusCode == http.StatusOK && policiesOp && (participant == t.Participant || t.Participant == "") {
		// Another participant's answer says nothing of ours.
		var doc struct {
			Category string   `xml:"Category"`
			Policy   *Policy  `xml:"Policy"`
			Policies []Policy `xml:"Policies>Policy"`
		}
		if xml.Unmarshal(data, &doc) == nil {
			if doc.Policy != nil {
				doc.Policies = append(doc.Policies, *doc.Policy)
			}
			t.learnCategory(ctx, participant, strings.TrimSpace(doc.Category))
			if targets, _ := m.policyTargets(participant, doc.Policies, held, "GET /policies/ through the Transport"); held != nil && len(targets) > 0 {
				if _, err := m.Limiter.Sync(ctx, targets...); err != nil {
					t.logger().Error("dict: mirror not reconciled with GET /policies/", slog.Any("error", err))
				}
			}
		}
	}
	if rt.Op == OpGetEntry && !isNil(t.Records) {
		lookedUp, _ := ParseKey(params["Key"])
		l := Lookup{
			EndToEndID: ref, Env: m.Catalog.Env(), PayerID: req.Header.Get(HeaderPayerID), KeyType: lookedUp.Type,
			Policy: keys[0].Policy, Participant: participant, Status: resp.StatusCode, LookedUpAt: sentAt,
		}
		t.retry(false, func() error { return t.Records.RecordLookup(ctx, l) },
			"dict: lookup not recorded: a payment will not be credited", slog.String("end_to_end_id", ref))
	}
	return resp, d, op, nil
}

// notSent reports whether err, from the base transport, proves that no
// connection was opened.
func notSent(err error) bool {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.As(err, &opErr) && opErr.Op == "dial"
}

// learnCategory sets the catalog's and the stored category from a
// GET /policies/ answer (decision 0068).
func (t *Transport) learnCategory(ctx context.Context, participant, category string) {
	if category == "" || ValidateCategory(category) != nil {
		return
	}
	m := t.Meter
	if m.Catalog.Category() != category {
		t.logger().Info("dict: the DICT reports another category", slog.String("from", m.Catalog.CategoryInEffect()), slog.String("to", category))
		_ = m.Catalog.SetCategory(category) // valid: checked above
	}
	if !isNil(t.Records) {
		t.retry(false, func() error {
			return t.Records.SaveCategory(ctx, m.Catalog.Env(), participant, category, m.Limiter.Now())
		}, "dict: category not saved", slog.String("category", category))
	}
}

func (t *Transport) logger() *slog.Logger { return cmp.Or(t.Logger, nowhere) }

// retry runs f again after a store failure, backing off from 25 ms to 1 s,
// eight attempts in all, so that an outcome lands through a database blip. A
// change the store may have applied (throttle.ErrOutcomeUnknown) is run
// again only when it is idempotent. The error that remains is logged as
// failed, with args.
func (t *Transport) retry(idempotent bool, f func() error, failed string, args ...any) error {
	wait := 25 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil {
			return nil
		}
		if !errors.Is(err, throttle.ErrStoreUnavailable) || attempt == 7 || !idempotent && errors.Is(err, throttle.ErrOutcomeUnknown) {
			t.logger().Error(failed, append(args, slog.Any("error", err))...)
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// settle settles r by outcome through store failures; one that still fails
// loses only a refund.
func (t *Transport) settle(ctx context.Context, m Meter, r reservation, outcome string, targets ...throttle.SyncTarget) error {
	defer r.landed()
	return t.retry(false, func() error {
		_, err := m.settle(ctx, r, outcome, targets...)
		return err
	}, "dict: settle failed: the hold stays (the mirror is stricter than the DICT until it refills)",
		slog.String("op", r.Op), slog.String("ref", r.Ref), slog.String("outcome", outcome), holdAttr(r))
}

// holdAttr lists what r holds, "KEY=N" per bucket, for an operator.
func holdAttr(r reservation) slog.Attr {
	held := make([]string, len(r.Keys))
	for i, k := range r.Keys {
		held[i] = fmt.Sprintf("%s=%d", k, r.Reserved[i])
	}
	return slog.String("held", strings.Join(held, " "))
}

// settleAfter429 settles r as a 429 and, in the same transaction, empties
// the bucket the DICT's problem names (less the other holds in flight) and
// blocks it for the remote Retry-After; an operation other than a getEntry
// blames its one bucket. A getEntry's 429 that names none (decision 0180)
// reads the participant's bucket after it (participantBucket): the payer is
// emptied when that reading shows the participant positive, the participant
// otherwise, and both follow the reading; without a reading both are only
// blocked for the Retry-After.
func (t *Transport) settleAfter429(ctx context.Context, m Meter, r reservation, req *http.Request, rt Route, keys []throttle.Key, resp *http.Response, body []byte, participant string, arrival uint64) {
	defer r.landed()
	wait := parseRetryAfter(resp.Header.Get("Retry-After"), m.Limiter.Now())
	var named []throttle.Key
	if p, err := DecodeProblem(body); err == nil {
		named = slices.DeleteFunc(slices.Clone(keys), func(k throttle.Key) bool { return !p.Names(k.Policy) })
	}
	// Asked outside syncMu (a round trip); held leaves out what lands meanwhile.
	attribute := len(named) == 0 && (rt.Op == OpGetEntry || rt.Op == opGetEntryInitiator) && len(keys) > 1
	participantKnown, available := false, int64(0)
	held := m.holds.watch()
	defer held.stop()
	if attribute {
		var release func()
		available, participantKnown, release = t.participantBucket(ctx, m, req, keys[1], participant, arrival)
		// The lookups held back by the reading go on only once the
		// mirror follows it (the sync below has landed).
		defer release()
	}
	// Under syncMu, a burst of 429s never counts a refund twice.
	t.syncMu.Lock()
	defer t.syncMu.Unlock()
	empty := func(k throttle.Key) throttle.SyncTarget {
		return throttle.SyncTarget{Key: k, Tokens: -r.but(k, m.holds.inFlight(k)), BlockFor: wait, Ref: r.Ref}
	}
	var targets []throttle.SyncTarget
	for _, k := range named {
		targets = append(targets, empty(k))
	}
	switch {
	case len(targets) > 0:
	case !attribute:
		targets = []throttle.SyncTarget{empty(keys[0])}
	case !participantKnown:
		// No reading after the 429: whichever bucket was empty, both
		// wait out the Retry-After and keep their balances.
		for _, k := range keys[:2] {
			targets = append(targets, throttle.SyncTarget{Key: k, Tokens: throttle.MaxTokens, BlockFor: wait, Ref: r.Ref})
		}
	default:
		pt := throttle.SyncTarget{Key: keys[1], Tokens: available - r.but(keys[1], held.held(keys[1])), Ref: "GET /policies/" + keys[1].Policy}
		if available < 1 {
			// The participant's bucket was the empty one: the payer
			// is left as the DICT has it.
			pt.BlockFor, pt.Ref = wait, r.Ref
		} else {
			targets = append(targets, empty(keys[0]))
		}
		targets = append(targets, pt)
	}
	if t.settle(ctx, m, r, outcomeOf(http.StatusTooManyRequests), targets...) != nil {
		// The sync alone, whatever became of the settle: a sync never
		// raises a balance, so running it again is harmless.
		t.retry(true, func() error {
			_, err := m.Limiter.Sync(ctx, targets...)
			return err
		}, "dict: sync after a remote 429 failed: the empty bucket is not blocked locally",
			slog.String("op", rt.Op), slog.String("bucket", targets[0].Key.String()))
	}
	m.Limiter.RemoteRefused("dict", targets[0].Key.Policy, "429") // balde_remote_refusals_total: the mirror drifted
	t.logger().Warn("dict: remote 429: the empty bucket was synced",
		slog.String("op", rt.Op), slog.String("bucket", targets[0].Key.String()), slog.Bool("participant_read", participantKnown),
		slog.Duration("retry_after", wait))
}

// readingTimeout bounds a reading of the participant's bucket after a 429.
const readingTimeout = 10 * time.Second

// readings coordinates the readings of a participant's anti-scan bucket
// after remote 429s that named no bucket (decision 0180): a reading stands
// only for the 429s that arrived before it was sent, and at most one is in
// flight per participant, shared by every Transport on one Meter. Safe for
// concurrent use.
type readings struct {
	seen    atomic.Uint64 // the 429s numbered so far, each as it arrives
	lowered atomic.Uint64 // the readings that found the participant empty or failed
	mu      sync.Mutex
	busy    map[string]*reading // per participant, the reading in flight, under mu
}

// reading is one GET /policies/{policy} about the participant's bucket.
type reading struct {
	after     uint64 // it stands for the 429s numbered up to after
	done      chan struct{}
	available int64
	ok        bool
}

// maxHoldAttempts bounds the holds a getEntry asks again because a
// reading lowered its participant's bucket while it was taken.
const maxHoldAttempts = 3

// hold takes the hold of a request. A getEntry first waits out the reading
// of its participant's bucket in flight; when a reading lowered the
// participant while its hold was taken, it gives the hold back and asks
// again, up to maxHoldAttempts: no lookup leaves after a reading on a
// balance from before it (decision 0180).
func (t *Transport) hold(ctx context.Context, m Meter, op, ref, participant string, keys []throttle.Key) (reservation, error) {
	gated := len(keys) > 1 && (op == OpGetEntry || op == opGetEntryInitiator)
	for attempt := 1; ; attempt++ {
		if gated {
			if err := m.readings.await(ctx, participant); err != nil {
				return reservation{}, fmt.Errorf("dict: %s: not sent: %w", op, err)
			}
		}
		before := m.readings.lowered.Load()
		r, err := m.reserve(ctx, op, ref, keys...)
		if err != nil || !gated || !r.Decision.Allowed || attempt == maxHoldAttempts || m.readings.lowered.Load() == before {
			return r, err
		}
		t.settle(context.WithoutCancel(ctx), m, r, outcomeNotSent)
	}
}

// await returns once no reading of participant's bucket is in flight, or
// with ctx's error.
func (rs *readings) await(ctx context.Context, participant string) error {
	for {
		rs.mu.Lock()
		c := rs.busy[participant]
		rs.mu.Unlock()
		if c == nil {
			return nil
		}
		select {
		case <-c.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// participantBucket returns the participant's anti-scan balance at the DICT
// as read after the 429 numbered mine: the reading in flight if it was sent
// after that 429, else a new one (ok false without one). Until the caller
// calls release, once the mirror follows it, the reading holds the
// participant's lookups back.
func (t *Transport) participantBucket(ctx context.Context, m Meter, orig *http.Request, key throttle.Key, participant string, mine uint64) (available int64, ok bool, release func()) {
	rs := m.readings
	nothing := func() {}
	deadline := time.NewTimer(readingTimeout)
	defer deadline.Stop()
	rs.mu.Lock()
	for {
		c := rs.busy[participant]
		if c == nil {
			break
		}
		rs.mu.Unlock()
		select {
		case <-c.done:
		case <-deadline.C:
			return 0, false, nothing
		}
		if c.after >= mine {
			return c.available, c.ok, nothing
		}
		rs.mu.Lock() // it was sent before this 429: ask again
	}
	c := &reading{after: rs.seen.Load(), done: make(chan struct{})}
	rs.busy[participant] = c
	rs.mu.Unlock()

	fctx, cancel := context.WithTimeout(ctx, readingTimeout)
	c.available, c.ok = t.fetchParticipantBucket(fctx, orig, key, participant)
	cancel()
	return c.available, c.ok, func() {
		rs.mu.Lock()
		delete(rs.busy, participant)
		if !c.ok || c.available < 1 {
			rs.lowered.Add(1)
		}
		rs.mu.Unlock()
		close(c.done)
	}
}

// fetchParticipantBucket asks GET /policies/{key.Policy} (at t.PoliciesURL,
// else orig's base URL) through t, charged to POLICIES_READ.
func (t *Transport) fetchParticipantBucket(ctx context.Context, orig *http.Request, key throttle.Key, participant string) (int64, bool) {
	base := t.PoliciesURL
	if base == "" {
		u := url.URL{Scheme: orig.URL.Scheme, User: orig.URL.User, Host: orig.URL.Host, Path: apiPrefix.FindString(orig.URL.Path)}
		base = u.String()
	}
	target := strings.TrimSuffix(base, "/") + "/policies/" + url.PathEscape(key.Policy)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, false
	}
	req.Header.Set(HeaderRequestingParticipant, participant)
	req.Header.Set("Accept", ContentTypeXML+", "+ContentTypeProblemXML)
	resp, d, _, err := t.exchange(req)
	if err != nil {
		t.logger().Warn("dict: participant bucket not read after a remote 429: the payer and the participant wait out its Retry-After", slog.Any("error", err))
		return 0, false
	}
	if !d.Allowed {
		t.logger().Warn("dict: participant bucket not read after a remote 429: POLICIES_READ empty locally",
			slog.Duration("retry_after", d.RetryAfter))
		return 0, false
	}
	var doc GetPolicyResponse
	if resp.StatusCode != http.StatusOK || Decode(resp.Body, &doc) != nil || doc.Policy.Name != key.Policy {
		t.logger().Warn("dict: participant bucket not read after a remote 429", slog.Int("status", resp.StatusCode))
		return 0, false
	}
	return doc.Policy.AvailableTokens, true
}

// parseRetryAfter reads a Retry-After (seconds or an HTTP date) relative to
// now, clamped to 0..maxRetryAfter; absent or malformed: 0.
func parseRetryAfter(s string, now time.Time) time.Duration {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	// Digits that do not fit an int64 are a huge number of seconds.
	if n, err := strconv.ParseInt(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) && s[0] >= '0' && s[0] <= '9' {
		return time.Duration(min(max(n, 0), int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(s); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

type reserveStopKey struct{}

// withReserveStop returns ctx carrying stop, which ends its request's
// reservation (then nothing is sent) but not a request once taken (decision 0124).
func withReserveStop(ctx, stop context.Context) context.Context {
	return context.WithValue(ctx, reserveStopKey{}, stop)
}

// reserveContext is ctx, also ended by its withReserveStop's stop; call
// release once the reservation returns.
func reserveContext(ctx context.Context) (rctx context.Context, release func()) {
	stop, ok := ctx.Value(reserveStopKey{}).(context.Context)
	if !ok || stop.Done() == nil {
		return ctx, func() {}
	}
	rctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(stop, cancel)
	return rctx, func() { unhook(); cancel() }
}
