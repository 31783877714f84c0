//go:build !unix

package sqlstore

// flushFile finds no descriptor to sync on this system (see
// checkpoint_unix.go).
func flushFile(string) bool { return false }
