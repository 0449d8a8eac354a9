//go:build race

package probes_test

// raceEnabled: the race detector's shadow memory inflates RSS.
const raceEnabled = true
