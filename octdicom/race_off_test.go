//go:build !race

package octdicom

const raceEnabled = false
