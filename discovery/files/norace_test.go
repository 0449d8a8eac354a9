//go:build !race

package files_test

// slowdown scales the time bounds of the hostile-input tests (see
// race_test.go).
const slowdown = 1
