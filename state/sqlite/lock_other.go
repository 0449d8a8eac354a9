//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import "os"

// flock does nothing where there is no flock(2): see Lock.
func flock(*os.File) error { return nil }
