package web

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/balde-throttle/balde/dict"
	"github.com/balde-throttle/balde/internal/i18n"
	"github.com/balde-throttle/balde/internal/view"
	"github.com/balde-throttle/balde/throttle"
)

// dictClient is what the DICT lookup page and the /policies/ endpoints
// need from the DICT client. *dict.Client implements it; tests may pass a
// fake.
type dictClient interface {
	// GetEntry looks a key up for a payer: the local mirror first, then
	// the DICT, settled by the answer.
	GetEntry(ctx context.Context, req dict.LookupRequest) (dict.Result[dict.GetEntryResponse], error)
	// CreditPayment credits the payment order of a lookup, once.
	CreditPayment(ctx context.Context, endToEndID string) (dict.PaymentCredit, error)
	// LocalPolicies and LocalPolicy report the participant's buckets in the
	// local mirror in the DICT's XML.
	LocalPolicies(ctx context.Context) (*dict.ListPoliciesResponse, error)
	LocalPolicy(ctx context.Context, policy string) (*dict.GetPolicyResponse, error)
	// Participant is this participant's ISPB.
	Participant() string
	// Catalog is the DICT's policy catalog of the mirror.
	Catalog() *dict.Catalog
}

var _ dictClient = (*dict.Client)(nil)

// dictLookupPage is dict_lookup.html: the form, and the result of a lookup
// or of a payment.
type dictLookupPage struct {
	layout
	Participant string
	Category    string
	Key         string
	PayerID     string

	// Status is the HTTP status of the page; InputError the message of a
	// bad key or payer id.
	Status     int
	InputError string

	EndToEndID string
	Entry      *entryView
	Refusal    *refusalView
	Remote     *remoteView
	// Buckets are the lookup's buckets (payer's, participant's) after it;
	// BucketsError says why they are missing.
	Buckets      []bucketView
	BucketsError string
	ShowScope    bool
	Payment      *paymentView

	LookupURL  string
	PaymentURL string
}

// entryView is a GetEntryResponse on the page: the entry, its instants in
// the page's zone.
type entryView struct {
	dict.Entry
	OpeningDate                               string
	CreationDate, KeyOwnershipDate, OpenClaim string
	ResponseTime, CorrelationID               string
	// StatisticsUpdated and Counters are the entry's Statistics.
	StatisticsUpdated string
	Counters          []dict.Counter
}

// refusalView is a lookup the local mirror refused: it was not sent.
type refusalView struct {
	throttle.Key
	// Whose is "payer" or "participant".
	Whose     string
	Reason    string
	RetryIn   string
	BucketURL string
}

// remoteView is an answer of the DICT other than 200.
type remoteView struct {
	Status     int
	NotFound   bool
	Type       string
	Title      string
	Detail     string
	RetryAfter string
}

// paymentView is the result of the payment button.
type paymentView struct {
	EndToEndID string
	Duplicate  bool
	PaidAt     string
	Rows       []creditRow
}

type creditRow struct {
	throttle.Adjusted
	BucketURL string
}

// showDictLookup is GET /dict/lookup: the lookup form.
func (s *Server) showDictLookup(w http.ResponseWriter, r *http.Request) error {
	return s.render(w, http.StatusOK, s.newDictLookupPage(r))
}

func (s *Server) newDictLookupPage(r *http.Request) dictLookupPage {
	return dictLookupPage{
		layout:      s.layout(r, "dictLookup", "dict_lookup.html"),
		Participant: s.Dict.Participant(),
		Category:    s.Dict.Catalog().CategoryInEffect(),
		Status:      http.StatusOK,
		ShowScope:   s.Scope != nil,
		LookupURL:   s.path("dictLookupSend"),
		PaymentURL:  s.path("dictPayment"),
	}
}

// lookupDictKey is POST /dict/lookup (key, payer_id): one getEntry through
// the DICT client. The page shows the entry (200) with a "payment sent"
// button; the local refusal with the empty bucket and the wait (429 and
// Retry-After: nothing was sent); the DICT's answer otherwise (404 for a
// key with no entry, which costs 20 tokens to the payer and 3 to the
// participant; 502 for a failure). A key or payer id that is not valid is
// a 400 with the reason, and nothing is taken or sent. Every outcome also
// shows the lookup's buckets as they are after it.
func (s *Server) lookupDictKey(w http.ResponseWriter, r *http.Request) error {
	p := s.newDictLookupPage(r)
	p.Key = strings.TrimSpace(r.PostForm.Get("key"))
	p.PayerID = strings.TrimSpace(r.PostForm.Get("payer_id"))

	res, err := s.Dict.GetEntry(r.Context(), dict.LookupRequest{Key: p.Key, PayerID: p.PayerID})
	var remote *dict.RemoteError
	switch {
	case err == nil && !res.Decision.Allowed:
		// Refused by the mirror, the limiter's Decision as it decided
		// (decision 0130): nothing was sent. 429 with the exact wait.
		p.Refusal = s.newRefusalView(res.Decision, p.PayerID, p.T)
		p.Status = s.prepareError(w, r, &throttle.RefusedError{Op: "dict " + dict.OpGetEntry, Decision: res.Decision}).status
	case err == nil:
		p.Entry = newEntryView(res.Response, p.T)
		p.EndToEndID = res.EndToEndID
	case errors.As(err, &remote):
		p.Remote = newRemoteView(remote)
		p.EndToEndID = res.EndToEndID
	case isAny(err, dictInputErrors):
		p.InputError = dictInputErrorIn(p.T, err)
	default:
		// The store or the network failed: the error page says so.
		return err
	}
	if err != nil {
		p.Status = s.prepareError(w, r, err).status
	}
	outcome := url.Values{"status": {strconv.Itoa(p.Status)}}
	if res.EndToEndID != "" {
		outcome.Set("e2e", res.EndToEndID)
	}
	if p.Refusal != nil {
		outcome.Set("refused", p.Refusal.Key.String())
	}
	requestInfoFrom(r.Context()).outcome = outcome.Encode()
	key, kerr := dict.ParseKey(p.Key)
	s.Logger.Info("dict lookup", slog.String("key_type", string(key.Type)), slog.Int("status", p.Status),
		slog.String("end_to_end_id", res.EndToEndID), slog.String("user", requestInfoFrom(r.Context()).user))

	// The buckets the lookup was charged to, as they are now. The DICT's
	// answer is shown even when they cannot be read.
	if kerr == nil && p.InputError == "" {
		keys := s.Dict.Catalog().LookupKeys(key.Type, p.PayerID, s.Dict.Participant())
		states, err := s.Limiter.States(r.Context(), keys)
		if err != nil {
			s.Logger.Error("dict lookup: bucket panel unavailable", slog.Any("error", err))
			p.BucketsError = "The buckets cannot be read right now (the store did not answer); the DICT's answer above stands."
		}
		for _, st := range states {
			p.Buckets = append(p.Buckets, s.newBucketViewIn(st, p.T))
		}
	}
	return s.render(w, p.Status, p)
}

// newEntryView shows e's instants in tr's zone (Server.TimeZone), as every
// page does (decision 0106).
func newEntryView(e *dict.GetEntryResponse, tr *i18n.Printer) *entryView {
	if e == nil {
		return nil
	}
	ts := func(t *dict.Timestamp) string {
		if t == nil || t.IsZero() {
			return ""
		}
		return tr.Zoned(t.Time)
	}
	en := e.Entry
	v := &entryView{
		Entry:            en,
		OpeningDate:      ts(&en.Account.OpeningDate),
		CreationDate:     ts(en.CreationDate),
		KeyOwnershipDate: ts(en.KeyOwnershipDate),
		OpenClaim:        ts(en.OpenClaimCreationDate),
		ResponseTime:     ts(&e.ResponseTime),
		CorrelationID:    e.CorrelationID,
	}
	if st := e.Statistics; st != nil {
		v.StatisticsUpdated = ts(&st.LastUpdated)
		v.Counters = st.Counters
	}
	return v
}

// newRefusalView renders a local refusal d in tr's language.
func (s *Server) newRefusalView(d throttle.Decision, payer string, tr *i18n.Printer) *refusalView {
	k := d.Key
	v := &refusalView{
		Key:       k,
		Whose:     "participant",
		Reason:    tr.Text(d.Reason.String()),
		RetryIn:   waitIn(tr, d.RetryAfter),
		BucketURL: s.bucketPath("adminBucket", k),
	}
	if k.Identifier == payer {
		v.Whose = "payer"
	}
	return v
}

func newRemoteView(e *dict.RemoteError) *remoteView {
	v := &remoteView{Status: e.Status, NotFound: e.NotFound()}
	if e.Problem != nil {
		v.Type, v.Title, v.Detail = e.Problem.TypeName(), e.Problem.Title, e.Problem.Detail
	}
	if e.RetryAfter > 0 {
		v.RetryAfter = view.FormatWait(e.RetryAfter)
	}
	return v
}

// creditDictPayment is POST /dict/payments (end_to_end_id), the "payment
// sent" button of a lookup that found its key: it stands for the pacs.008
// the app would send, and credits the lookup's buckets (+1 PF or +2 PJ to
// the payer, +1 to the participant, capped at capacity) with
// dict.Client.CreditPayment. A second press changes nothing and says the
// credit was already applied. An EndToEndId with no lookup is a 404; one
// whose lookup did not find the key, a 409.
func (s *Server) creditDictPayment(w http.ResponseWriter, r *http.Request) error {
	e2e := strings.TrimSpace(r.PostForm.Get("end_to_end_id"))
	pc, err := s.Dict.CreditPayment(r.Context(), e2e)
	if err != nil {
		return err
	}
	p := s.newDictLookupPage(r)
	p.EndToEndID = e2e
	p.PayerID = pc.Lookup.PayerID
	pv := &paymentView{EndToEndID: e2e, Duplicate: pc.Duplicate}
	if !pc.Lookup.PaidAt.IsZero() {
		pv.PaidAt = view.WhenIn(p.T, p.T.Zoned, pc.Lookup.PaidAt, s.now())
	}
	for _, a := range pc.Adjusted {
		pv.Rows = append(pv.Rows, creditRow{Adjusted: a, BucketURL: s.bucketPath("adminBucket", a.Key)})
	}
	p.Payment = pv
	s.Logger.Info("dict payment credited", slog.String("end_to_end_id", e2e), slog.Bool("duplicate", pc.Duplicate),
		slog.String("user", requestInfoFrom(r.Context()).user))
	return s.render(w, http.StatusOK, p)
}

// dictInputPhrases are the words of the dict package's errors about a key
// or a payer id, longest first; the values quoted in them stay as typed.
var dictInputPhrases = []string{
	"has capital letters (the DICT stores EMAIL keys in lowercase)",
	"is not 12 digits or capital letters followed by 2 check digits",
	"is not E.164 (+ then 2 to 15 digits, no leading 0)",
	"(not a CPF, CNPJ, PHONE, EMAIL or EVP)",
	"is neither 11 nor 14 characters",
	"has all characters equal",
	"has wrong check digits",
	"is not a lowercase UUID",
	"is not an email address",
	"has all digits equal",
	"is not 11 digits",
	"invalid payer id",
	"invalid EMAIL key",
	"invalid PHONE key",
	"invalid EVP key",
	"unknown key type",
	"invalid CPF",
	"invalid CNPJ",
	"invalid key",
}

// dictInputErrorIn renders a bad key or payer id for the lookup page in
// tr's language: without the package prefixes ("dict: "), each phrase of
// the dict package through the catalog, the values quoted as typed.
func dictInputErrorIn(tr *i18n.Printer, err error) string {
	msg := publicMessage(err)
	pairs := make([]string, 0, 2*len(dictInputPhrases))
	for _, phrase := range dictInputPhrases {
		pairs = append(pairs, phrase, tr.Text(phrase))
	}
	return strings.NewReplacer(pairs...).Replace(msg)
}
