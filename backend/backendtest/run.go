package backendtest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/backend/plan"
	"github.com/ag-go/ag/backend/reference"
)

// Run runs the conformance suite against the backend registered as name,
// one subtest per op case ("add/broadcast", "matmul/transB", ...), then whole
// graphs, buffers and memory, and (without -short) large tensors. When the
// driver is not registered or reports itself unavailable here it skips,
// saying so, or fails when AG_REQUIRE_DEVICES names it (package testenv).
func Run(t *testing.T, name string) {
	t.Helper()
	be := open(t, name)
	s := &suite{be: be, caps: be.Caps()}
	t.Logf("backend %q: %s (max buffer %d elements, unsupported %v)", s.caps.Name, s.caps.Device, s.caps.MaxBufferElems, s.caps.Unsupported)
	for _, c := range opCases() {
		t.Run(c.name, func(t *testing.T) {
			if why, ok := knownDeviations[s.caps.Name][c.name]; ok {
				t.Skipf("KNOWN DEVIATION of %s from backend.Op's special values, not checked: %s", s.caps.Name, why)
			}
			rng := seeded(c.name)
			for i, in := range c.build(rng) {
				t.Run(fmt.Sprintf("%d_%s", i, in.label()), func(t *testing.T) { s.check(t, c.tol, in) })
			}
		})
	}
	for _, c := range graphCases() {
		t.Run(c.name, func(t *testing.T) { c.run(t, s) })
	}
}

// knownDeviations are the special-value cases a backend is known to fail,
// by backend name and case name, each with the reason. Run skips them with
// a message that says so (go test -v shows it) rather than failing the whole
// suite; deleting an entry turns its check back on.
var knownDeviations = map[string]map[string]string{
	"ggml-vulkan": {
		"special/scatter_add_rows-source": "ggml-vulkan has no scatter-add (GET_ROWS_BACK), so scatter_add_rows " +
			"is a one-hot matmul, where 0 x NaN and 0 x Inf make a non-finite source element NaN in every " +
			"row of its column; a finite encoding of NaN/Inf would triple that matmul",
		"special/col2im/decomposed": "col2im's decomposition scatter-adds with scatter_add_rows, the one-hot matmul " +
			"above (an infinite column gives NaN); ggml-vulkan runs col2im natively (acc per kernel offset), " +
			"and core's gradient of im2col takes that",
	},
}

// open opens the named driver, or skips the test with the reason (fails it
// when the driver is required).
func open(t testing.TB, name string) backend.Backend {
	t.Helper()
	var names []string
	for _, d := range backend.Drivers() {
		names = append(names, d.Name)
		if d.Name != name {
			continue
		}
		if !d.OK {
			testenv.SkipDevice(t, name, "backendtest.Run: driver says: "+d.Why)
		}
		be, err := backend.Open(name)
		if err != nil {
			t.Fatalf("backendtest.Run: driver %q says available (%s) but Open fails: %v", name, d.Why, err)
		}
		t.Cleanup(func() {
			if err := be.Close(); err != nil {
				t.Errorf("backendtest.Run: Close(%q): %v", name, err)
			}
		})
		return be
	}
	testenv.SkipDevice(t, name, fmt.Sprintf("backendtest.Run: driver %q not registered in this build (registered: %v)", name, names))
	return nil
}

type suite struct {
	be   backend.Backend
	caps backend.Caps
}

// instance is one graph to run with its initial arg contents.
type instance struct {
	g *backend.Graph
	// args are the initial contents of Run's args, one per graph arg.
	args [][]float32
	// runs is how many times the compiled program runs (0 means 1); after
	// each run every arg is compared with Eval's.
	runs int
	// feed, if set, gives new contents for some args before run k >= 1
	// (program reuse with new data).
	feed func(k int) map[int][]float32
	// terms is the reduction length for tolerances with Terms set.
	terms int
	// decompose: every composite op is decomposed (plan.Expand) before
	// Compile, also those the backend lowers natively.
	decompose bool
}

// label names an instance by the shapes of its graph's args: "3x7,7,3x7"
// ("s" for a scalar).
func (in instance) label() string {
	parts := make([]string, in.g.NumArgs)
	for i := range parts {
		sh := argShape(in.g, i)
		if len(sh) == 0 {
			parts[i] = "s"
			continue
		}
		ds := make([]string, len(sh))
		for k, d := range sh {
			ds[k] = fmt.Sprint(d)
		}
		parts[i] = strings.Join(ds, "x")
	}
	return strings.Join(parts, ",")
}

// check compiles in.g, runs it in.runs times and compares every arg after each
// run with Eval under the tolerance named tolKey.
func (s *suite) check(t *testing.T, tolKey string, in instance) {
	t.Helper()
	tol, ok := tolerances[tolKey]
	if !ok {
		t.Fatalf("backendtest: no tolerance %q in the table", tolKey)
	}
	for _, n := range in.g.Nodes {
		if !s.caps.Supports(n.Op) {
			// An unsupported op must fail to compile, cleanly.
			p, err := s.compile(in.g)
			if err == nil {
				p.Release()
				t.Fatalf("Compile accepted op %v that Caps.Unsupported lists", n.Op)
			}
			testenv.Skipf(t, "op %v unsupported by %s (Caps.Unsupported), Compile refuses it: %v", n.Op, s.caps.Name, err)
		}
	}
	bufs := s.upload(t, in.args)
	prog, err := s.compileAs(in.g, in.decompose)
	if err != nil {
		t.Fatalf("Compile: %v\ngraph:\n%s", err, in.g)
	}
	defer prog.Release()
	ref := to64(in.args)
	runs := max(in.runs, 1)
	// A backend may flush subnormal inputs to zero (see backend.Op): the
	// graph evaluated on flushed args is a second reference it may match.
	var alt [][]float64
	if runs == 1 && hasSubnormal(in.args) && !packs(in.g) {
		alt = to64(in.args)
		for _, a := range alt {
			for j, x := range a {
				a[j] = flushed(x)
			}
		}
		if _, err := Eval(in.g, alt); err != nil {
			t.Fatalf("reference on flushed args: %v", err)
		}
	}
	used := 0.0 // the largest error/bound seen: how much of the tolerance the backend needs
	defer func() {
		if tol != (Tol{}) && !tol.Bits && !t.Failed() {
			t.Logf("worst error is %.3g of the bound %+v", used, tol)
		}
	}()
	for k := 0; k < runs; k++ {
		if k > 0 && in.feed != nil {
			for i, data := range in.feed(k) {
				s.write(t, bufs[i], data)
				ref[i] = to64([][]float32{data})[0]
			}
		}
		mag := magnitudes(t, in.g, ref, tol, in.terms)
		if _, err := Eval(in.g, ref); err != nil {
			t.Fatalf("reference: %v", err)
		}
		if _, err := prog.Run(bufs); err != nil {
			t.Fatalf("run %d: Run: %v\ngraph:\n%s", k, err, in.g)
		}
		for i, b := range bufs {
			got := make([]float32, len(ref[i]))
			if err := s.be.Read(b, 0, got); err != nil {
				t.Fatalf("run %d: Read arg %d: %v", k, i, err)
			}
			var m []float64
			if mag != nil {
				m = mag[i]
			}
			if alt != nil {
				ref[i] = closest(got, ref[i], alt[i])
			}
			if msg := compare(got, ref[i], m, tol, in.terms, argShape(in.g, i)); msg != "" {
				t.Fatalf("run %d of %d: arg %d %s: %s\ngraph:\n%s", k+1, runs, i, argRole(in.g, i), msg, in.g)
			}
			used = max(used, usedBound(got, ref[i], m, tol, in.terms))
			// The device stores f32: so does the reference between runs.
			for j, x := range ref[i] {
				ref[i][j] = reference.Widen(reference.Narrow(x))
			}
		}
	}
}

// compile is compileAs(g, false).
func (s *suite) compile(g *backend.Graph) (backend.Program, error) { return s.compileAs(g, false) }

// compileAs calls Compile on g with the composites the backend does not
// lower natively decomposed (as core does; with decompose, all of them),
// and turns a panic into an error, so that a backend crashing on a graph
// fails the test instead of the whole test binary.
func (s *suite) compileAs(g *backend.Graph, decompose bool) (p backend.Program, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("Compile panicked: %v", r)
		}
	}()
	caps := s.caps
	if decompose {
		caps.Composites = nil
	}
	xg, _ := plan.Expand(g, caps)
	return s.be.Compile(xg)
}

// upload allocates one buffer per arg and writes its contents; the buffers
// are freed when the test ends.
func (s *suite) upload(t testing.TB, args [][]float32) []backend.Buffer {
	t.Helper()
	bufs := make([]backend.Buffer, len(args))
	for i, a := range args {
		b, err := s.be.Alloc(len(a))
		if err != nil {
			t.Fatalf("Alloc(%d) for arg %d: %v", len(a), i, err)
		}
		t.Cleanup(func() { s.be.Free(b) })
		if b.Len() != len(a) {
			t.Fatalf("Alloc(%d).Len() = %d", len(a), b.Len())
		}
		s.write(t, b, a)
		bufs[i] = b
	}
	return bufs
}

func (s *suite) write(t testing.TB, b backend.Buffer, data []float32) {
	t.Helper()
	if err := s.be.Write(b, 0, data); err != nil {
		t.Fatalf("Write(%d elements): %v", len(data), err)
	}
}

// magnitudes evaluates the graph on |args| when the tolerance is stated
// relative to the sum of |terms| (matmul, sum): for graphs of sums and
// products that is the magnitude of the terms each element adds up.
func magnitudes(t *testing.T, g *backend.Graph, ref [][]float64, tol Tol, terms int) [][]float64 {
	if !tol.Terms {
		return nil
	}
	abs := make([][]float64, len(ref))
	for i, r := range ref {
		abs[i] = make([]float64, len(r))
		for j, x := range r {
			abs[i][j] = math.Abs(x)
		}
	}
	if _, err := Eval(g, abs); err != nil {
		t.Fatalf("reference on |args|: %v", err)
	}
	return abs
}

// compare checks got against want element by element and describes the worst
// element when some are out of tolerance ("" when all pass).
func compare(got []float32, want, mag []float64, tol Tol, terms int, shape []int) string {
	worst, worstRatio, bad := -1, 0.0, 0
	var worstErr, worstBound float64
	for i, w := range want {
		if tol.Bits {
			if a, b := math.Float32bits(got[i]), math.Float32bits(reference.Narrow(w)); !tol.sameWord(a, b) {
				return fmt.Sprintf("element %d %v of %v: bits %08x, want %08x", i, coords(i, shape, len(want)), shape, a, b)
			}
			continue
		}
		g := float64(got[i])
		// w is float64: a result past the f32 range is the infinity that
		// f32 rounds it to, and a subnormal one has no relative precision
		// left and may be flushed to zero: any subnormal or zero matches it.
		// A NaN or infinity on either side must match exactly: no bound
		// (an infinite one included) excuses it.
		w32 := float64(float32(w))
		var err, bound float64
		switch {
		case math.IsNaN(w) || math.IsNaN(g):
			if math.IsNaN(w) && math.IsNaN(g) {
				continue
			}
			err = math.Inf(1)
		case math.IsInf(w32, 0) || math.IsInf(g, 0):
			if w32 == g {
				continue
			}
			err = math.Inf(1)
		case math.Abs(g) < minNormal32 && math.Abs(w) < minNormal32:
			continue
		default:
			err = math.Abs(g - w)
			if bound = tol.bound(w, mag, i, terms); err <= bound {
				continue
			}
		}
		bad++
		ratio := err / bound
		if bound == 0 || math.IsNaN(bound) {
			ratio = math.Inf(1)
		}
		if worst < 0 || ratio > worstRatio {
			worst, worstRatio, worstErr, worstBound = i, ratio, err, bound
		}
	}
	if bad == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d elements out of tolerance %+v; worst element %d %v of %v: got %.9g, want %.9g (|err| %.3g > bound %.3g)",
		bad, len(want), tol, worst, coords(worst, shape, len(want)), shape, got[worst], want[worst], worstErr, worstBound)
}

// minNormal32 is the smallest normal f32; below it values are subnormal.
const minNormal32 = 0x1p-126

// flushed is x with a subnormal f32 value replaced by a zero of its sign.
func flushed(x float64) float64 {
	if x != 0 && math.Abs(x) < minNormal32 {
		return math.Copysign(0, x)
	}
	return x
}

// packs reports whether g holds 16-bit storage ops: their words are bit
// patterns, which no latitude for subnormal numbers covers.
func packs(g *backend.Graph) bool {
	for _, n := range g.Nodes {
		if n.Op.Info().Class == backend.ClassPack {
			return true
		}
	}
	return false
}

func hasSubnormal(args [][]float32) bool {
	for _, a := range args {
		for _, x := range a {
			if flushed(float64(x)) != float64(x) {
				return true
			}
		}
	}
	return false
}

// closest picks, element by element, whichever of two references is nearer
// got (NaN is nearest NaN), so got passes if each element matches one.
func closest(got []float32, a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		g := float64(got[i])
		da, db := math.Abs(g-a[i]), math.Abs(g-b[i])
		switch {
		case math.IsNaN(g):
			da, db = btof(!math.IsNaN(a[i])), btof(!math.IsNaN(b[i]))
		case g == a[i]:
			da = 0 // equal infinities
		case g == b[i]:
			db = 0
		}
		out[i] = a[i]
		if db < da || math.IsNaN(da) && !math.IsNaN(db) {
			out[i] = b[i]
		}
	}
	return out
}

func btof(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// usedBound is the largest |got-want|/bound over finite elements.
func usedBound(got []float32, want, mag []float64, tol Tol, terms int) float64 {
	worst := 0.0
	for i, w := range want {
		g := float64(got[i])
		if b := tol.bound(w, mag, i, terms); b > 0 && !math.IsInf(float64(float32(w)), 0) && !math.IsNaN(w) && !math.IsInf(g, 0) && !math.IsNaN(g) {
			worst = max(worst, math.Abs(g-w)/b)
		}
	}
	return worst
}

// coords writes flat index i as a multi-index of shape when the shape covers
// the whole buffer (an oversized arg is shown flat).
func coords(i int, shape []int, n int) []int {
	if backend.NumElems(shape) != n {
		return []int{i}
	}
	c := make([]int, len(shape))
	for k := len(shape) - 1; k >= 0; k-- {
		c[k] = i % shape[k]
		i /= shape[k]
	}
	return c
}

// argShape is the shape under which the graph reads or writes arg i.
func argShape(g *backend.Graph, i int) []int {
	for _, o := range g.Outputs {
		if o.Arg == i {
			return g.Nodes[o.Node].Shape
		}
	}
	for _, n := range g.Nodes {
		if n.Op == backend.OpArg && n.Arg == i {
			return n.Shape
		}
	}
	return nil
}

// argRole names what the graph does with arg i, for failure messages.
func argRole(g *backend.Graph, i int) string {
	var roles []string
	for j, n := range g.Nodes {
		if n.Op == backend.OpArg && n.Arg == i {
			roles = append(roles, fmt.Sprintf("read by node %d as %v", j, n.Shape))
		}
	}
	for _, o := range g.Outputs {
		if o.Arg == i {
			roles = append(roles, fmt.Sprintf("output of node %d (%v %v)", o.Node, g.Nodes[o.Node].Op, g.Nodes[o.Node].Shape))
		}
	}
	return "(" + strings.Join(roles, ", ") + ")"
}

// seeded returns a generator seeded from the case name, so every case draws
// the same numbers whatever runs before it.
func seeded(name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(h.Sum64(), 0x5eed))
}

func to64(in [][]float32) [][]float64 {
	out := make([][]float64, len(in))
	for i, a := range in {
		out[i] = make([]float64, len(a))
		for j, x := range a {
			out[i][j] = reference.Widen(x) // packed words may be signaling NaNs
		}
	}
	return out
}

// errNoPanic runs f and turns a panic into an error.
func errNoPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New(fmt.Sprint("panic: ", r))
		}
	}()
	return f()
}
