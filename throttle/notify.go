package throttle

import (
	"context"
	"log/slog"
	"time"
)

// Notifier receives severity transitions after the transaction that caused
// them committed. Notify must not block for long: the Limiter calls it on
// the decision's goroutine. Implementations: SlogNotifier here, and
// webhook.Notifier (package internal/webhook) for HTTP endpoints.
type Notifier interface {
	Notify(ctx context.Context, c SeverityChange)
}

// Notifiers fans one change out to several notifiers.
type Notifiers []Notifier

// Notify calls every notifier in order.
func (ns Notifiers) Notify(ctx context.Context, c SeverityChange) {
	for _, n := range ns {
		n.Notify(ctx, c)
	}
}

// SlogNotifier logs each transition: at Warn when a bucket gets worse than
// Healthy, at Info when it recovers.
type SlogNotifier struct{ Logger *slog.Logger }

// Notify logs c.
func (n SlogNotifier) Notify(ctx context.Context, c SeverityChange) {
	level, msg := slog.LevelWarn, "bucket severity changed"
	if c.To < c.From {
		level = slog.LevelInfo
	}
	if c.Resolved() {
		msg = "bucket severity resolved"
	}
	n.Logger.Log(ctx, level, msg,
		slog.String("key", c.Key.String()),
		slog.String("from", c.From.String()),
		slog.String("to", c.To.String()),
		slog.Int64("tokens", c.Tokens),
		slog.Int64("capacity", c.Capacity),
		slog.Time("at", c.At))
}

// Observer receives measurements for metrics. Implementations must be safe
// for concurrent use and fast; web implements it with Prometheus.
type Observer interface {
	// Decided is called after every Take that reached the store (or failed
	// open), with the time it took.
	Decided(d Decision, latency time.Duration)
	// FailedOpen is called for each key of a Take admitted because the store
	// was unavailable and the policy fails open.
	FailedOpen(key Key, err error)
	// SeverityChanged is called for each committed transition.
	SeverityChanged(c SeverityChange)
}

// RemoteObserver is an optional part of an Observer: the remote side
// refused a request the mirror had admitted (a DICT 429, a SIFEN 0301),
// reported through Limiter.RemoteRefused. system is "dict" or "sifen",
// policy the bucket the remote side said was empty (else the operation's
// first policy), code the remote answer. Implementations must be safe for
// concurrent use and fast.
type RemoteObserver interface {
	RemoteRefused(system, policy, code string)
}

// StoreObserver is an optional part of an Observer: StoreFailed is called
// for each key of a Take whose transaction failed with ErrStoreUnavailable,
// before the fail mode applies; err tells the cause (ErrStoreTimeout: a
// bounded wait ended it). Implementations must be safe for concurrent use
// and fast.
type StoreObserver interface {
	StoreFailed(key Key, err error)
}

type nopObserver struct{}

func (nopObserver) Decided(Decision, time.Duration) {}
func (nopObserver) FailedOpen(Key, error)           {}
func (nopObserver) SeverityChanged(SeverityChange)  {}
