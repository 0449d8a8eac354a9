//go:build race

package files_test

// slowdown scales the time bounds of the hostile-input tests: the race
// detector makes the parsers and key derivations they time several times
// slower, and a bound is there to tell a refusal from a hang or a bomb,
// not to measure speed.
const slowdown = 8
