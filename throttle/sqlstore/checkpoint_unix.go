//go:build unix

package sqlstore

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// flushFile syncs the file at path to disk through a descriptor the
// process already holds on it (SQLite's own, found in /proc/self/fd), and
// reports whether it found one. It never opens or closes a descriptor of
// the file: closing one would drop every POSIX lock the process holds on
// it, SQLite's included
// (https://www.sqlite.org/howtocorrupt.html, section 2.2). A descriptor
// closed and reused in between only gets another file synced. Without
// /proc (not Linux) it finds none.
func flushFile(path string) bool {
	abs, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		abs = p
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || target != abs {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		return syscall.Fsync(fd) == nil
	}
	return false
}
