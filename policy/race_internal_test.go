//go:build race

package policy

// raceEnabled: the race detector allocates beside the code it watches.
const raceEnabled = true
