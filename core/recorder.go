package core

import (
	"fmt"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/profile"
)

// recorder is core's one seam to the profiler: every record core hands
// the profile package - an op or node as it is built, a run's stages and
// node times, a transfer, a launch - goes through its methods, so the
// profiler's recording API is met here only. A Device has one (Device.prof);
// it holds nothing, as the profiler is the process's.
type recorder struct{}

// built records the building of t, which took create (an op the user
// called, or a node inside one).
func (recorder) built(t *Tensor, create time.Duration) {
	if t.callHead {
		profile.Op(t.pass, t.user, create)
	} else {
		profile.Node(t.pass, t.user, create)
	}
}

// run records a run's profile (nil: nothing to record).
func (recorder) run(r *profile.Run) { profile.RecordRun(r) }

// launch records n launches of a run at site.
func (recorder) launch(site string, n int) { profile.Launch(site, n) }

// xfer records a transfer of bytes at site, up to the device or down.
func (recorder) xfer(up bool, site string, bytes int) {
	if !profile.Counting() {
		return
	}
	dir := profile.Down
	if up {
		dir = profile.Up
	}
	profile.Xfer(dir, site, bytes)
}

// nodeTime is t's entry in a run's profile: its IR op, the op and layer its
// user wrote, its pass, and graph node i's time from times (nil: untimed).
func (t *Tensor) nodeTime(times *backend.NodeTimes, i int) profile.NodeTime {
	n := profile.NodeTime{Op: t.op.String(), User: t.user, Scope: t.scope, Pass: t.pass, How: profile.Even, Call: t.callHead}
	if times != nil {
		n.Dur, n.How = times.Dur[i], timing(times.How[i])
	}
	return n
}

// timing maps a backend's kind of node time to the profiler's.
func timing(k backend.TimeKind) profile.Timing {
	switch k {
	case backend.TimeNone, backend.TimeMeasured:
		return profile.Measured // a node that ran no kernel took exactly no time
	case backend.TimeSplit:
		return profile.Split
	case backend.TimeEstimated:
		return profile.Estimated
	}
	panic(fmt.Sprintf("core: unknown node time kind %d", k))
}
