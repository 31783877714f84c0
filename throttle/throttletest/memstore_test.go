package throttletest_test

import (
	"testing"

	"github.com/balde-throttle/balde/throttle"
	"github.com/balde-throttle/balde/throttle/throttletest"
)

func TestMemStore(t *testing.T) {
	throttletest.TestStore(t, func(t *testing.T, clock throttle.Clock) throttletest.FullStore {
		return throttletest.NewMemStore(clock)
	})
}

func TestFailModes(t *testing.T) { throttletest.TestFailModes(t) }
