package dict

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// MaxRetryAfter bounds the wait a remote Retry-After may impose on the
// mirror, in either form (seconds or an HTTP date): a longer or absurd one
// ("Fri, 31 Dec 9999") blocks for MaxRetryAfter. The DICT's longest honest
// wait (a PF payer deep in debt at 2 tokens a minute) is well under it.
const MaxRetryAfter = 24 * time.Hour

// Transport is an http.RoundTripper that throttles a PSP's own DICT client
// with balde's mirror: it maps each request's method and path to its
// operation and policies (Routes), takes the worst-case cost before sending
// (the payer from PI-PayerId), settles by the response's status, handles a
// remote 429 (see Client), and records getEntry lookups for payment credits.
// A request the mirror refuses is not sent: RoundTrip returns a
// *throttle.RefusedError (throttle.AsRefusal reads it, also through the
// *url.Error of http.Client). A request that is no DICT operation, or whose
// key or payer is malformed, is an error and is not sent.
//
// The response is returned whatever its status, with its body read and
// replaced (at most MaxBodySize bytes). Safe for concurrent use.
type Transport struct {
	// Base sends the requests (the PSP's own transport, with its mutual
	// TLS). Default http.DefaultTransport.
	Base http.RoundTripper
	// Meter is the local mirror.
	Meter Meter
	// Participant is the ISPB charged when a request has no
	// PI-RequestingParticipant header (which is then set).
	Participant string
	// Records, when set, keeps every getEntry the DICT answered.
	Records LookupStore
	// PoliciesURL is the base URL of GET /policies/ when it lives on its
	// own host (e.g. https://dict-ratelimit.pi.rsfn.net.br:16422/api/v1);
	// default: the request's own base URL.
	PoliciesURL string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	rt, params, ok := MatchRoute(req.Method, req.URL.Path)
	if !ok {
		closeBody(req)
		return nil, fmt.Errorf("dict: %s %s is not a DICT operation: not sent", req.Method, req.URL.Path)
	}
	participant := req.Header.Get(HeaderRequestingParticipant)
	if participant == "" {
		participant = t.Participant
		req = req.Clone(req.Context())
		req.Header.Set(HeaderRequestingParticipant, participant)
	}
	if err := ValidateISPB(participant); err != nil {
		closeBody(req)
		return nil, fmt.Errorf("dict: %s: %s: %w", rt.Op, HeaderRequestingParticipant, err)
	}
	keys, err := t.Meter.Catalog.RequestKeys(rt, params, req.Header, req.URL.Query(), participant)
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("dict: %s: %w", rt.Op, err)
	}
	ref := req.Header.Get(HeaderEndToEndID)
	if rt.Op == OpGetEntry {
		if err := ValidateEndToEndID(ref); err != nil {
			closeBody(req)
			return nil, fmt.Errorf("dict: %s: %s: %w", rt.Op, HeaderEndToEndID, err)
		}
	}

	r, err := t.Meter.Reserve(req.Context(), rt.Op, ref, keys...)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if slot, ok := req.Context().Value(decisionKey{}).(*throttle.Decision); ok {
		*slot = r.Decision
	}
	if !r.Decision.Allowed {
		closeBody(req)
		return nil, &throttle.RefusedError{Op: "dict " + rt.Op, Decision: r.Decision}
	}
	// From here the reservation is settled whatever happens to the
	// request's context.
	ctx := context.WithoutCancel(req.Context())
	sentAt := t.Meter.Limiter.Now()
	resp, err := t.base().RoundTrip(req)
	if err != nil {
		// The hold stays: the DICT may have counted the request at its worst.
		return nil, err
	}
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, MaxBodySize+1))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(data))
	if rerr != nil {
		t.settle(ctx, r, OutcomeTransportError)
		return nil, fmt.Errorf("dict: %s: read body: %w", rt.Op, rerr)
	}

	if resp.StatusCode == http.StatusTooManyRequests {
		t.settleAfter429(ctx, r, req, rt, keys, resp, data, participant)
	} else {
		t.settle(ctx, r, Outcome(resp.StatusCode))
	}
	if rt.Op == OpGetEntry && t.Records != nil {
		t.record(ctx, Lookup{
			EndToEndID: ref, Env: t.Meter.Catalog.Env(), PayerID: req.Header.Get(HeaderPayerID), KeyType: mustKeyType(params["Key"]),
			Policy: keys[0].Policy, Participant: participant, Status: resp.StatusCode, LookedUpAt: sentAt,
		})
	}
	return resp, nil
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) logger() *slog.Logger {
	if t.Logger != nil {
		return t.Logger
	}
	return slog.Default()
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func mustKeyType(key string) KeyType {
	k, _ := ParseKey(key)
	return k.Type
}

// retry runs f until it succeeds, fails with something other than a store
// failure, or about 3 s have passed: the outcome of a request that reached
// the DICT must land in the mirror through a database blip. A change whose
// outcome the store lost (throttle.ErrOutcomeUnknown) may have landed and
// is never run again: a settle run twice refunded twice.
func retry(f func() error) error { return retryStore(f, false) }

// retryIdempotent is retry for a change that may be applied twice (a sync):
// a commit in doubt is retried too.
func retryIdempotent(f func() error) error { return retryStore(f, true) }

// retryStore runs f again after a store failure, backing off from 25 ms to
// 1 s, eight attempts in all; a commit in doubt is run again only when f is
// idempotent.
func retryStore(f func() error, idempotent bool) error {
	wait := 25 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := f()
		if err == nil || !errors.Is(err, throttle.ErrStoreUnavailable) || attempt == 7 ||
			!idempotent && errors.Is(err, throttle.ErrOutcomeUnknown) {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, time.Second)
	}
}

// settle settles r by outcome, retrying through store failures. A settle
// that still fails loses only a refund: the hold already counted the worst
// case, so the mirror stays on the DICT's safe side.
func (t *Transport) settle(ctx context.Context, r Reservation, outcome string) {
	err := retry(func() error {
		_, err := t.Meter.Settle(ctx, r, outcome)
		return err
	})
	if err != nil {
		t.logger().Error("dict: settle failed: the hold stays (the mirror is stricter than the DICT until it refills)",
			slog.String("op", r.Op), slog.String("ref", r.Ref), slog.String("outcome", outcome), holdAttr(r), slog.Any("error", err))
	}
}

// holdAttr lists what r holds, "KEY=N" per bucket: what an operator
// would give back by hand after a settle that never landed.
func holdAttr(r Reservation) slog.Attr {
	held := make([]string, len(r.Keys))
	for i, k := range r.Keys {
		held[i] = fmt.Sprintf("%s=%d", k, r.Reserved[i])
	}
	return slog.String("held", strings.Join(held, " "))
}

func (t *Transport) record(ctx context.Context, l Lookup) {
	err := retry(func() error { return t.Records.RecordLookup(ctx, l) })
	if err != nil {
		t.logger().Error("dict: lookup not recorded: a payment will not be credited", slog.String("end_to_end_id", l.EndToEndID), slog.Any("error", err))
	}
}

// settleAfter429 settles r as a 429 (its hold comes back) and, in the same
// transaction, lowers only the bucket the DICT says is empty to 0 and blocks
// it for the remote Retry-After: no request is admitted on the refund in
// between. The bucket is the one the problem names (a violation or the
// detail naming a policy of the request); when it names none, the payer's
// USER bucket of a getEntry, whose participant bucket is then checked with
// GET /policies/{policy} (within POLICIES_READ's own limit) and lowered to
// what the DICT reports; for any other operation, its one bucket.
func (t *Transport) settleAfter429(ctx context.Context, r Reservation, req *http.Request, rt Route, keys []throttle.Key, resp *http.Response, body []byte, participant string) {
	wait := ParseRetryAfter(resp.Header.Get("Retry-After"), t.Meter.Limiter.Now())
	var named []throttle.Key
	if p, err := DecodeProblem(body); err == nil {
		for _, k := range keys {
			if p.Names(k.Policy) {
				named = append(named, k)
			}
		}
	}
	checkParticipant := false
	switch {
	case len(named) > 0:
	case rt.Op == OpGetEntry || rt.Op == OpGetEntryInitiator:
		named, checkParticipant = keys[:1], true
	default:
		named = keys[:1]
	}
	targets := make([]throttle.SyncTarget, len(named))
	for i, k := range named {
		targets[i] = throttle.SyncTarget{Key: k, Tokens: 0, BlockFor: wait, Ref: req.Header.Get(HeaderEndToEndID)}
	}
	outcome := Outcome(http.StatusTooManyRequests)
	err := retry(func() error {
		_, err := t.Meter.SettleAndSync(ctx, r, outcome, targets...)
		return err
	})
	if err != nil {
		t.logger().Error("dict: settle and sync after a remote 429 failed: the hold stays; syncing alone",
			slog.String("op", rt.Op), slog.String("ref", r.Ref), holdAttr(r), slog.Any("error", err))
		// The sync must land whatever became of the settle (in doubt, or
		// failed): without it the bucket the DICT says is empty keeps
		// admitting into remote 429s. A sync never raises a balance and
		// only lengthens a block, so running it again is harmless, even
		// after a commit in doubt.
		err = retryIdempotent(func() error {
			_, err := t.Meter.Limiter.Sync(ctx, targets...)
			return err
		})
		if err != nil {
			t.logger().Error("dict: sync after a remote 429 failed: the empty bucket is not blocked locally",
				slog.String("op", rt.Op), slog.String("bucket", named[0].String()), slog.Any("error", err))
		}
	}
	t.logger().Warn("dict: remote 429: the empty bucket was synced",
		slog.String("op", rt.Op), slog.String("bucket", named[0].String()), slog.Duration("retry_after", wait))
	if checkParticipant {
		t.checkParticipant(ctx, req, keys[1], participant)
	}
}

// checkParticipant asks the DICT for the participant's anti-scan bucket
// (through t: charged to POLICIES_READ, refused locally when it is empty)
// and lowers the mirror to it.
func (t *Transport) checkParticipant(ctx context.Context, orig *http.Request, key throttle.Key, participant string) {
	base := t.PoliciesURL
	if base == "" {
		u := *orig.URL
		u.RawQuery, u.Fragment = "", ""
		u.Path = apiPrefix.FindString(u.Path)
		u.RawPath = ""
		base = u.String()
	}
	target := strings.TrimSuffix(base, "/") + "/policies/" + url.PathEscape(key.Policy)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return
	}
	req.Header.Set(HeaderRequestingParticipant, participant)
	req.Header.Set("Accept", ContentTypeXML+", "+ContentTypeProblemXML)
	resp, err := t.RoundTrip(req)
	if err != nil {
		t.logger().Info("dict: participant bucket not checked after a remote 429", slog.Any("error", err))
		return
	}
	defer resp.Body.Close()
	var doc GetPolicyResponse
	if resp.StatusCode != http.StatusOK || Decode(resp.Body, &doc) != nil || doc.Policy.Name != key.Policy {
		return
	}
	_, err = t.Meter.Limiter.Sync(ctx, throttle.SyncTarget{Key: key, Tokens: doc.Policy.AvailableTokens, Ref: "GET /policies/" + key.Policy})
	if err != nil {
		t.logger().Error("dict: sync of the participant bucket failed", slog.Any("error", err))
	}
}

// ParseRetryAfter reads a Retry-After header relative to now: whole seconds
// or an HTTP date, clamped to 0..MaxRetryAfter. Absent or malformed: 0.
func ParseRetryAfter(s string, now time.Time) time.Duration {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n <= 0 {
			return 0
		}
		if n >= int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	if len(s) > 0 && s[0] >= '0' && s[0] <= '9' {
		// Digits that do not fit an int64: a huge number of seconds.
		if _, err := strconv.ParseUint(s, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			return MaxRetryAfter
		}
	}
	if t, err := http.ParseTime(s); err == nil && t.After(now) {
		return min(t.Sub(now), MaxRetryAfter)
	}
	return 0
}
