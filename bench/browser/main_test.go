package main

import (
	"strings"
	"testing"
)

// run refuses counts the page would refuse run by run, before it starts a
// browser: -profile-steps beyond ag.profile's bound (0 profiles nothing).
func TestRunRefusesBadCounts(t *testing.T) {
	ok := Options{Width: 8, Depth: 2, Batch: 4, Steps: 10, Rounds: 1, Every: 1}
	for _, c := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"profile-steps -1", func(o *Options) { o.ProfileSteps = -1 }, "-profile-steps -1"},
		{"profile-steps 1001", func(o *Options) { o.ProfileSteps = 1001 }, "-profile-steps 1001"},
		{"every 0", func(o *Options) { o.Every = 0 }, "every 0"},
	} {
		o := ok
		c.set(&o)
		err := run(o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
