//go:build !linux

package cli

// releaseExecutablePages does nothing outside Linux; see exepages_linux.go.
func releaseExecutablePages() error { return nil }
