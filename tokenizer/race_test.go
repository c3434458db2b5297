//go:build race

package tokenizer

func init() { raceEnabled = true }
