// Package webhook is a throttle.Notifier that posts each severity change as
// JSON to a URL (an alerting system, a chat hook).
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// Event is the JSON body posted for one change.
type Event struct {
	Policy string `json:"policy"`
	Env    string `json:"env"`
	// Identifier is the bucket's, masked when it is personal data (see
	// MaskIdentifier and Options.RevealIdentifiers).
	Identifier string    `json:"identifier"`
	From       string    `json:"from"`
	To         string    `json:"to"`
	Tokens     int64     `json:"tokens"`
	Capacity   int64     `json:"capacity"`
	At         time.Time `json:"at"`
	// Status is "firing" while the bucket is worse than Healthy and
	// "resolved" when it is Healthy again (Alertmanager's words), so a
	// receiver can close the alert it opened.
	Status string `json:"status"`
}

// Notifier posts events from a bounded queue on its own goroutine, so a
// slow or dead endpoint never slows a decision: when the queue is full an
// event is dropped and counted. Close drains the queue.
//
// A post follows redirects only to the same scheme and host (at most
// maxRedirects): a redirect elsewhere fails the post, so the body (the
// bucket, its identifier) is never sent to a host that was not configured.
type Notifier struct {
	url      string
	client   *http.Client
	logger   *slog.Logger
	personal func(throttle.Key) bool
	reveal   bool
	queue    chan Event
	dropped  atomic.Int64
	failed   atomic.Int64
	wg       sync.WaitGroup
	once     sync.Once
}

var _ throttle.Notifier = (*Notifier)(nil)

// Options tune a Notifier; the zero value is usable.
type Options struct {
	// Client defaults to one with a 5 s timeout.
	Client *http.Client
	// Queue bounds the events waiting to be posted. Default 1024.
	Queue int
	// Logger receives the posts that failed. Nil discards them
	// (slog.Default() is never written to).
	Logger *slog.Logger
	// Personal, when set, names further keys whose identifier is personal
	// data (an application's per-person buckets): such an identifier is
	// posted as "***" unless MaskIdentifier recognizes its shape. A CPF or
	// CNPJ (the payer of the DICT's USER buckets) is masked without it.
	Personal func(throttle.Key) bool
	// RevealIdentifiers posts identifiers unmasked (opt-out: the receiver
	// is trusted with personal data).
	RevealIdentifiers bool
}

// maxRedirects bounds the same-host redirects a post follows.
const maxRedirects = 3

// New starts a Notifier posting to url.
func New(url string, opts Options) *Notifier {
	opts.Client = cmp.Or(opts.Client, &http.Client{Timeout: 5 * time.Second})
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	client := *opts.Client // a copy: the caller's client keeps its policy
	client.CheckRedirect = sameHostOnly(opts.Client.CheckRedirect)
	n := &Notifier{url: url, client: &client, logger: opts.Logger, queue: make(chan Event, opts.Queue),
		personal: opts.Personal, reveal: opts.RevealIdentifiers}
	n.wg.Go(n.run)
	return n
}

// sameHostOnly is a CheckRedirect that refuses a redirect to another scheme
// or host, and more than maxRedirects, before the redirected request is
// sent; then next, if any, decides.
func sameHostOnly(next func(*http.Request, []*http.Request) error) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		first := via[0].URL
		if req.URL.Scheme != first.Scheme || req.URL.Host != first.Host {
			return fmt.Errorf("webhook: redirect to another host (%s://%s) refused", req.URL.Scheme, req.URL.Host)
		}
		if len(via) > maxRedirects {
			return fmt.Errorf("webhook: more than %d redirects", maxRedirects)
		}
		if next != nil {
			return next(req, via)
		}
		return nil
	}
}

// MaskIdentifier masks an identifier that is a Brazilian CPF (11 digits) or
// CNPJ (14 digits), punctuated or not, as Brazilian systems show them:
// "***.456.789-**" and "**.345.678/0001-**". Anything else is returned as
// it is.
func MaskIdentifier(id string) string {
	digits := make([]byte, 0, 14)
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case c >= '0' && c <= '9':
			digits = append(digits, c)
		case c == '.' || c == '-' || c == '/':
		default:
			return id
		}
	}
	switch len(digits) {
	case 11:
		return "***." + string(digits[3:6]) + "." + string(digits[6:9]) + "-**"
	case 14:
		return "**." + string(digits[2:5]) + "." + string(digits[5:8]) + "/" + string(digits[8:12]) + "-**"
	}
	return id
}

// identifier is k's identifier as posted (see Options).
func (n *Notifier) identifier(k throttle.Key) string {
	if n.reveal {
		return k.Identifier
	}
	if masked := MaskIdentifier(k.Identifier); masked != k.Identifier {
		return masked
	}
	if n.personal != nil && n.personal(k) {
		return "***"
	}
	return k.Identifier
}

// Notify queues c; it never blocks.
func (n *Notifier) Notify(_ context.Context, c throttle.SeverityChange) {
	e := Event{
		Policy: c.Key.Policy, Env: c.Key.Env, Identifier: n.identifier(c.Key),
		From: c.From.String(), To: c.To.String(), Tokens: c.Tokens, Capacity: c.Capacity, At: c.At,
		Status: "firing",
	}
	if c.Resolved() {
		e.Status = "resolved"
	}
	select {
	case n.queue <- e:
	default:
		n.dropped.Add(1)
	}
}

// Dropped and Failed count the events lost to a full queue and to a failed
// post.
func (n *Notifier) Dropped() int64 { return n.dropped.Load() }
func (n *Notifier) Failed() int64  { return n.failed.Load() }

// Close posts what is queued and stops.
func (n *Notifier) Close() error {
	n.once.Do(func() { close(n.queue) })
	n.wg.Wait()
	return nil
}

func (n *Notifier) run() {
	for e := range n.queue {
		if err := n.post(e); err != nil {
			n.failed.Add(1)
			n.logger.Warn("severity webhook failed", slog.String("url", n.url), slog.Any("error", err))
		}
	}
}

func (n *Notifier) post(e Event) error {
	body, err := json.Marshal(e)
	if err != nil {
		return err
	}
	resp, err := n.client.Post(n.url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook: %s answered %s", n.url, resp.Status)
	}
	return nil
}
