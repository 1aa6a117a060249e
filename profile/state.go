package profile

import "time"

// state is everything the profiler records; mu guards it.
type state struct {
	pass     [numPasses]passData
	xfer     map[xferKey]*xferCount
	xferEver bool // Count(true) was called at least once (the seed's "never enabled")
	launch   map[string]int
	steps    stepLog
	trace    ring
	epoch    time.Time // trace time zero
}

func newState() state {
	s := state{launch: map[string]int{}, epoch: time.Now()}
	s.resetXfer()
	s.trace.setCap(defaultTraceCap)
	return s
}

func (s *state) resetXfer() { s.xfer = map[xferKey]*xferCount{} }

// passData accumulates one pass. Times are float64 nanoseconds: run shares
// are fractions of a duration, and float64 holds whole nanoseconds exactly
// up to 104 days.
type passData struct {
	stage     [numStages]float64
	ops       int                 // nodes recorded (Op and Node)
	calls     int                 // calls recorded (Op)
	runs      int                 // runs that gave this pass a share
	timedRuns int                 // of those, runs whose compute was device-timed
	byOp      map[string]*opTotal // by user op
	byLayer   map[string]*opTotal // by layer scope
}

// opTotal is one user op's (or layer's) share of a pass.
type opTotal struct {
	calls   int     // calls recorded (Op)
	nodes   int     // program nodes run
	create  float64 // ns
	compute float64 // ns
	// timed holds compute by how it was timed; ir the compute by IR op.
	timed [numTimings]float64
	ir    map[string]*irTotal
}

// irTotal is one IR op's part of a user op.
type irTotal struct {
	nodes   int
	compute float64
}

func (t *opTotal) addNode(n NodeTime, compute float64) {
	t.nodes++
	t.compute += compute
	if n.How < numTimings {
		t.timed[n.How] += compute
	}
	if t.ir == nil {
		t.ir = map[string]*irTotal{}
	}
	it := t.ir[n.Op]
	if it == nil {
		it = &irTotal{}
		t.ir[n.Op] = it
	}
	it.nodes++
	it.compute += compute
}

func (d *passData) reset() { *d = passData{} }

func (d *passData) empty() bool {
	if d.ops != 0 || d.runs != 0 {
		return false
	}
	for _, v := range d.stage {
		if v != 0 {
			return false
		}
	}
	return true
}

func (d *passData) op(name string) *opTotal { return total(&d.byOp, name) }

func (d *passData) layer(name string) *opTotal { return total(&d.byLayer, name) }

func total(m *map[string]*opTotal, name string) *opTotal {
	if *m == nil {
		*m = map[string]*opTotal{}
	}
	t := (*m)[name]
	if t == nil {
		t = &opTotal{}
		(*m)[name] = t
	}
	return t
}

// maxSteps bounds the kept step times; older ones still count in the totals.
const maxSteps = 4096

// stepLog keeps the wall time of the last maxSteps steps.
type stepLog struct {
	n     int       // steps recorded
	total float64   // ns, all steps
	last  []float64 // ns, ring of the last maxSteps
}

func (l *stepLog) add(ns float64) {
	if len(l.last) < maxSteps {
		l.last = append(l.last, ns)
	} else {
		l.last[l.n%maxSteps] = ns
	}
	l.n++
	l.total += ns
}

// ordered returns the kept step times, oldest first.
func (l *stepLog) ordered() []float64 {
	out := make([]float64, 0, len(l.last))
	if len(l.last) < maxSteps {
		return append(out, l.last...)
	}
	i := l.n % maxSteps
	out = append(out, l.last[i:]...)
	return append(out, l.last[:i]...)
}
