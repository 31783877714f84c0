package sqlstore

import "context"

// CatchUpWAL runs the checkpointer's catch-up on the store's writer now
// (checkpoint.go); false when the store has no checkpointer.
func (s *Store) CatchUpWAL(ctx context.Context) (ran, busy bool, err error) {
	if s.checkpoints == nil {
		return false, false, nil
	}
	busy, err = s.checkpoints.onWriter(ctx, "PASSIVE")
	return true, busy, err
}

// FlushFile is flushFile (checkpoint_unix.go).
var FlushFile = flushFile
