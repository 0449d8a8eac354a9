//go:build !race

package probes_test

const raceEnabled = false
