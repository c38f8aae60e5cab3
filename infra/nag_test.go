package main

import (
	"slices"
	"testing"
)

// cdk-nag's AwsSolutions pack finds no error in any configuration: each
// finding is fixed or suppressed with its reason (nag.go).
func TestCDKNag(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(mapsKeys(configs)) {
		s := synth(t, config)
		for _, e := range s.nagErrors {
			t.Errorf("%s: %s", config, e)
		}
	}
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
