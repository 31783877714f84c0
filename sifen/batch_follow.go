package sifen

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/balde-throttle/balde/throttle"
)

// follower is what FollowDocuments needs: *Sender is one.
type follower interface {
	List(ctx context.Context, f Filter) ([]Document, error)
	Poll(ctx context.Context) ([]LotOutcome, error)
	Get(ctx context.Context, id int64) (Document, error)
}

var _ follower = (*Sender)(nil)

// followIdle is the wait between two queries when no lot names its own.
const followIdle = time.Second

// FollowDocuments fetches SIFEN's results until every sent document of ids,
// and every document still sent when it starts, is approved or rejected:
// it polls the lots as their schedules fall due, tells each result, and
// sleeps until the first lot is due again. It returns nil once none is
// pending, else the pending ids with ctx's error or a store failure. Of cfg
// it uses Sleep and Progress: EventWaiting (Wait, IDs pending),
// EventResult (Document), EventPollFailed (Err; the follow goes on).
func FollowDocuments(ctx context.Context, f follower, ids []int64, cfg BatchConfig) ([]int64, error) {
	if cfg.Sleep == nil {
		cfg.Sleep = throttle.SleepContext
	}
	emit := cfg.emit
	pending := make(map[int64]bool, len(ids))
	for _, id := range ids {
		pending[id] = true
	}
	// stop returns the pending ids with ctx's error, else err.
	stop := func(err error) ([]int64, error) { return slices.Sorted(maps.Keys(pending)), cmp.Or(ctx.Err(), err) }
	for flt := (Filter{Statuses: []Status{StatusSent}, Limit: 1000}); ; {
		docs, err := f.List(ctx, flt)
		if ctx.Err() != nil || err != nil {
			return stop(err)
		}
		for _, d := range docs {
			pending[d.ID] = true
		}
		if len(docs) < flt.Limit {
			break
		}
		flt.BeforeID = docs[len(docs)-1].ID
	}
	for len(pending) > 0 {
		out, err := f.Poll(ctx)
		if ctx.Err() != nil || errors.Is(err, throttle.ErrStoreUnavailable) {
			return stop(err)
		}
		if err != nil {
			emit(Event{Kind: EventPollFailed, Err: err})
		}
		for _, id := range slices.Sorted(maps.Keys(pending)) {
			d, err := f.Get(ctx, id)
			if ctx.Err() != nil || err != nil {
				return stop(err)
			}
			if d.Status == StatusSent {
				continue
			}
			delete(pending, id)
			emit(Event{Kind: EventResult, IDs: []int64{id}, Document: &d})
		}
		if len(pending) == 0 {
			return nil, nil
		}
		// Until the first lot is due, or a short while when another process queries one.
		wait := time.Duration(0)
		for _, o := range out {
			if o.elsewhere {
				o.Wait = followIdle
			}
			if o.NotDue && (wait == 0 || o.Wait < wait) {
				wait = o.Wait
			}
		}
		if wait <= 0 {
			wait = followIdle
		}
		left := slices.Sorted(maps.Keys(pending))
		emit(Event{Kind: EventWaiting, IDs: left, Wait: wait})
		if err := cfg.Sleep(ctx, wait); err != nil {
			return left, err
		}
	}
	return nil, nil
}
