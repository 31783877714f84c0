// Package webhook is a throttle.Notifier that posts each severity change as
// JSON to a URL (an alerting system, a chat hook).
package webhook

import (
	"bytes"
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
	Policy     string    `json:"policy"`
	Env        string    `json:"env"`
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
type Notifier struct {
	url     string
	client  *http.Client
	logger  *slog.Logger
	queue   chan Event
	dropped atomic.Int64
	failed  atomic.Int64
	wg      sync.WaitGroup
	once    sync.Once
}

var _ throttle.Notifier = (*Notifier)(nil)

// Options tune a Notifier; the zero value is usable.
type Options struct {
	// Client defaults to one with a 5 s timeout.
	Client *http.Client
	// Queue bounds the events waiting to be posted. Default 1024.
	Queue  int
	Logger *slog.Logger
}

// New starts a Notifier posting to url.
func New(url string, opts Options) *Notifier {
	if opts.Client == nil {
		opts.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if opts.Queue <= 0 {
		opts.Queue = 1024
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default().WithGroup("webhook")
	}
	n := &Notifier{url: url, client: opts.Client, logger: opts.Logger, queue: make(chan Event, opts.Queue)}
	n.wg.Go(n.run)
	return n
}

// Notify queues c; it never blocks.
func (n *Notifier) Notify(_ context.Context, c throttle.SeverityChange) {
	e := Event{
		Policy: c.Key.Policy, Env: c.Key.Env, Identifier: c.Key.Identifier,
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
