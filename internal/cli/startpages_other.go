//go:build !linux

package cli

// releaseStartupPages does nothing outside Linux; see startpages_linux.go.
func releaseStartupPages() error { return nil }
