package throttle

import (
	"context"
	"fmt"
	"time"
)

// Sleep waits d or until ctx ends, whichever comes first, and returns ctx's
// error in the second case. Every wait of balde takes one (a Waiter, the
// SIFEN batch and follow, the SIFEN gateway, the batch reports), with
// SleepContext by default; a test passes one that advances its fake clock.
type Sleep func(ctx context.Context, d time.Duration) error

// SleepContext sleeps on a timer of the wall clock.
func SleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waiter waits for admission on a Limiter: Limiter.Wait with the way of
// sleeping chosen. The zero Sleep is SleepContext.
type Waiter struct {
	Limiter *Limiter
	Sleep   Sleep
	// Refused, when set, is told of each refusal before Wait sleeps its
	// RetryAfter (a batch command shows it on its progress bar). It must not
	// block.
	Refused func(Decision)
}

// Wait is shorthand for Waiter{Limiter: l}.Wait: it blocks until the
// charges are admitted (and taken) or ctx ends. It is x/time/rate's Wait
// for the throttle: a batch command calls it before each send instead of a
// sleep-and-retry loop of its own.
func (l *Limiter) Wait(ctx context.Context, ref string, charges ...Charge) (Decision, error) {
	return Waiter{Limiter: l}.Wait(ctx, ref, charges...)
}

// Wait takes the charges (Limiter.Take) and, while they are refused, sleeps
// the Decision's RetryAfter and takes again. Every decision is the
// limiter's, on the limiter's clock; only the sleeping is the Waiter's.
//
// It returns the admitting Decision and nil, or the last refusal and an
// error:
//
//   - ctx ends while sleeping: the error wraps both a *RefusedError
//     (AsRefusal gives the Decision) and ctx's error (errors.Is
//     context.Canceled or context.DeadlineExceeded).
//   - ctx's deadline comes before the wait is over: Wait does not sleep in
//     vain but returns at once with the same error, wrapping
//     context.DeadlineExceeded. The deadline is compared on the wall clock
//     (a context's deadline is wall time).
//   - a refusal with no wait (RetryAfter 0: nothing the limiter knows
//     will admit it): the *RefusedError alone.
//   - Take's own errors (bad input, store unavailable), unchanged.
//
// A refused Take counts like any refusal, so Wait takes again only once the
// wait is over.
func (w Waiter) Wait(ctx context.Context, ref string, charges ...Charge) (Decision, error) {
	return w.Do(ctx, func(ctx context.Context) (Decision, error) {
		return w.Limiter.Take(ctx, ref, charges...)
	})
}

// Do is Wait for an operation that takes its own tokens: while try answers
// a refusal (an error-free Decision with Allowed false: nothing was sent)
// Do sleeps the RetryAfter and calls it again, so the wait happens before a
// request starts, never inside it. It returns like Wait.
func (w Waiter) Do(ctx context.Context, try func(context.Context) (Decision, error)) (Decision, error) {
	sleep := w.Sleep
	if sleep == nil {
		sleep = SleepContext
	}
	for {
		if err := ctx.Err(); err != nil {
			return Decision{}, fmt.Errorf("throttle: wait: %w", err)
		}
		d, err := try(ctx)
		if err != nil || d.Allowed {
			return d, err
		}
		refused := &RefusedError{Op: "wait", Decision: d}
		if d.RetryAfter <= 0 {
			return d, refused
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d.RetryAfter {
			return d, fmt.Errorf("throttle: %w: %w", refused, context.DeadlineExceeded)
		}
		if w.Refused != nil {
			w.Refused(d)
		}
		if err := sleep(ctx, d.RetryAfter); err != nil {
			return d, fmt.Errorf("throttle: %w: %w", refused, err)
		}
	}
}
