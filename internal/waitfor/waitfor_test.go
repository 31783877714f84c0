package waitfor_test

import (
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/balde-throttle/balde/internal/waitfor"
)

// fakeT records Fatalf instead of ending the goroutine.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
}

func TestDeadlinesFailWithWhatWasAwaited(t *testing.T) {
	sleeper := exec.Command("sleep", "30")
	require.NoError(t, sleeper.Start())
	var wg sync.WaitGroup
	wg.Add(1)
	defer wg.Done()
	tests := []struct {
		name string
		wait func(tb testing.TB)
		want string
	}{
		{"cmd", func(tb testing.TB) { _ = waitfor.Cmd(tb, sleeper, 50*time.Millisecond, "the %s child", "sleeping") },
			"the sleeping child: still running after 50ms; killed pid"},
		{"recv", func(tb testing.TB) { waitfor.Recv(tb, make(chan int), 10*time.Millisecond, "a value") },
			"a value: nothing received within 10ms"},
		{"group", func(tb testing.TB) { waitfor.Group(tb, &wg, 10*time.Millisecond, "workers") },
			"workers: not done within 10ms"},
		{"until", func(tb testing.TB) { waitfor.Until(tb, 10*time.Millisecond, func() bool { return false }, "never") },
			"never: not true within 10ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeT{TB: t}
			start := time.Now()
			tc.wait(f)
			require.Contains(t, f.failed, tc.want)
			require.Less(t, time.Since(start), 15*time.Second)
		})
	}
	require.NotNil(t, sleeper.ProcessState, "the child was reaped after the kill")
}

func TestWaitsReturnWhatArrives(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	require.Equal(t, 7, waitfor.Recv(t, ch, time.Second, "seven"))
	cmd := exec.Command("true")
	require.NoError(t, cmd.Start())
	require.NoError(t, waitfor.Cmd(t, cmd, 10*time.Second, "true"))
	n := 0
	waitfor.Until(t, time.Second, func() bool { n++; return n == 3 }, "three calls")
	require.Equal(t, 3, n)
}
