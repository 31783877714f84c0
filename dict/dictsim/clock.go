package dictsim

import (
	"sync"
	"time"
)

// clock is the simulator's time: the system clock, or a fake one that
// stands still until advanced (Config.FakeClock). Safe for concurrent use.
type clock struct {
	fake bool
	mu   sync.Mutex
	now  time.Time
}

func (c *clock) Now() time.Time {
	if !c.fake {
		return time.Now()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// advance moves a fake clock forward by d (>= 0) and returns the new time.
func (c *clock) advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}
