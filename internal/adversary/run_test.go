package adversary

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/buffer"
	"github.com/ag-go/ag/core"
)

// outcome classifies what a case did.
type outcome string

const (
	handled   outcome = "handled"    // a clear error, a named panic, or the right value
	crash     outcome = "crash"      // the process died (counted by the parent)
	bare      outcome = "bare-panic" // a runtime panic, or a panic/error not naming its function
	wrong     outcome = "wrong"      // a silent wrong result (or a bad input accepted)
	lost      outcome = "lost"       // a value computed before the case changed or became unreadable
	outcomesN         = 5
)

var defects = []outcome{crash, bare, wrong, lost}

// result is one case's outcome and why.
type result struct {
	out    outcome
	detail string
}

func ok() result { return result{out: handled} }
func fail(o outcome, format string, args ...any) result {
	return result{out: o, detail: fmt.Sprintf(format, args...)}
}

// env is what a case gets: the device under test, a second device of the
// same backend, and the canary values whose survival is checked after it.
type env struct {
	name  string
	d     *core.Device
	other *core.Device
	// canary: a parameter, a buffer and a small step, made before the cases.
	param *core.Tensor
	buf   *buffer.Buffer
}

var paramVals = []float32{1, 2, 3, 4, 5, 6, 7, 8}

func bufVals() []float32 {
	v := make([]float32, 4*16)
	for i := range v {
		v[i] = float32(i) - 20
	}
	return v
}

func newEnv(name string) (*env, error) {
	d, err := core.Open(name)
	if err != nil {
		return nil, err
	}
	o, err := core.Open(name)
	if err != nil {
		return nil, err
	}
	e := &env{name: name, d: d, other: o, param: d.Param(paramVals, 2, 4)}
	if e.buf, err = buffer.New(d, 4, 16); err != nil {
		return nil, err
	}
	if err := e.buf.Write(0, bufVals()); err != nil {
		return nil, err
	}
	return e, e.canary()
}

// canary checks that what existed before a case is intact and that the
// device still computes: the parameter, the buffer, and a small step.
func (e *env) canary() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the canary panicked: %v", r)
		}
	}()
	v, err := e.param.Data()
	if err != nil || !slices.Equal(v, paramVals) {
		return fmt.Errorf("parameter reads %v (%v), want %v", v, err, paramVals)
	}
	b, err := e.buf.Read(0, 16)
	if err != nil || !slices.Equal(b, bufVals()) {
		return fmt.Errorf("buffer reads %v... (%v)", b[:min(4, len(b))], err)
	}
	s, err := core.Sum(core.Mul(e.param, e.param)).Item()
	if err != nil || s != 204 {
		return fmt.Errorf("sum of squares %g (%v), want 204", s, err)
	}
	rows, err := e.buf.GetRows([]int{15, 0})
	if err != nil {
		return err
	}
	r, err := rows.Data()
	if err != nil || !slices.Equal(r, append(bufVals()[60:64:64], bufVals()[:4]...)) {
		return fmt.Errorf("GetRows reads %v (%v)", r, err)
	}
	return nil
}

// panics runs f and classifies its panic: it must panic with a message that
// names fn (e.g. "core.MatMul"), not a runtime error.
func panics(fn string, f func()) (res result) {
	defer func() {
		r := recover()
		switch {
		case r == nil:
			res = fail(wrong, "no panic (want one naming %s)", fn)
		case isRuntime(r):
			res = fail(bare, "runtime panic: %v", r)
		case !strings.Contains(fmt.Sprint(r), fn):
			res = fail(bare, "panic %q does not name %s", fmt.Sprint(r), fn)
		default:
			res = ok()
		}
	}()
	f()
	return ok()
}

func isRuntime(r any) bool {
	_, ok := r.(runtime.Error)
	if e, isErr := r.(error); isErr && !ok {
		var re runtime.Error
		ok = errors.As(e, &re)
	}
	return ok
}

// errs classifies a returned error: there must be one, and it must contain
// every part of want (the function, the values).
func errs(err error, want ...string) result {
	if err == nil {
		return fail(wrong, "no error (want one containing %q)", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			return fail(bare, "error %q does not say %q", err, w)
		}
	}
	return ok()
}

// errIs is errs for a sentinel.
func errIs(err, target error, want ...string) result {
	if r := errs(err, want...); r.out != handled {
		return r
	}
	if !errors.Is(err, target) {
		return fail(bare, "error %q does not wrap %q", err, target)
	}
	return ok()
}

// value checks a result against want: NaN matches NaN, infinities match
// exactly, finite values within tol relative.
func value(got []float32, err error, want []float32, tol float64) result {
	if err != nil {
		return fail(wrong, "error %v (want %v)", err, want)
	}
	if len(got) != len(want) {
		return fail(wrong, "%d values, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		switch {
		case math.IsNaN(w):
			if !math.IsNaN(g) {
				return fail(wrong, "[%d] = %g, want NaN (got %v)", i, g, got)
			}
		case math.IsInf(w, 0):
			if g != w {
				return fail(wrong, "[%d] = %g, want %g (got %v)", i, g, w, got)
			}
		case math.IsNaN(g) || math.Abs(g-w) > tol*math.Max(1, math.Abs(w)):
			return fail(wrong, "[%d] = %g, want %g (got %v)", i, g, w, got)
		}
	}
	return ok()
}

// data reads t, recovering a panic into the classification.
func data(t *core.Tensor) ([]float32, error) { return t.Data() }

// adCase is one adversarial input.
type adCase struct {
	name string
	run  func(e *env) result
}

// runCase runs one case and classifies it, a stray panic included, then
// checks the canary.
func runCase(e *env, c adCase) (res result) {
	func() {
		defer func() {
			if r := recover(); r != nil {
				if isRuntime(r) {
					res = fail(bare, "runtime panic: %v", r)
				} else {
					res = fail(bare, "unexpected panic: %v", r)
				}
			}
		}()
		res = c.run(e)
	}()
	if err := e.canary(); err != nil {
		return fail(lost, "after the case: %v (case: %s %s)", err, res.out, res.detail)
	}
	return res
}

// The child process runs the cases of one backend from a given index and
// reports each on stdout; TestMain takes that role when AG_ADV_CHILD is set.
const (
	childEnv = "AG_ADV_CHILD"
	fromEnv  = "AG_ADV_FROM"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		from, _ := strconv.Atoi(os.Getenv(fromEnv))
		os.Exit(child(name, from))
	}
	os.Exit(m.Run())
}

func child(name string, from int) int {
	e, err := newEnv(name)
	if err != nil {
		fmt.Printf("ADV setup %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 2
	}
	cases := allCases()
	for i := from; i < len(cases); i++ {
		fmt.Printf("ADV start %d\n", i)
		r := runCase(e, cases[i])
		fmt.Printf("ADV end %d %s %s\n", i, r.out, strings.ReplaceAll(r.detail, "\n", " "))
	}
	if err := e.d.Close(); err != nil {
		fmt.Printf("ADV setup closing the device at the end: %v\n", err)
		return 2
	}
	return 0
}

// tally is one backend's counts.
type tally struct {
	n      int
	counts map[outcome]int
	notes  []string
}

// runBackend runs every case on name in child processes, restarting after a
// crash with the next case.
func runBackend(t *testing.T, name string) tally {
	cases := allCases()
	tl := tally{counts: map[outcome]int{}}
	from := 0
	for from < len(cases) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+name, fromEnv+"="+strconv.Itoa(from))
		out, _ := cmd.StdoutPipe()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting the %s child: %v", name, err)
		}
		// A hang guard, per case: restarted at every case, so a child that
		// runs all its cases slowly on a loaded machine is never killed (one
		// guard over the whole child was), only one stuck in a case.
		timer := time.AfterFunc(caseGuard, func() { cmd.Process.Kill() })
		started := -1
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			f := strings.SplitN(sc.Text(), " ", 5)
			if len(f) < 3 || f[0] != "ADV" {
				continue
			}
			switch f[1] {
			case "setup":
				t.Fatalf("%s: %s", name, strings.Join(f[2:], " "))
			case "start":
				started, _ = strconv.Atoi(f[2])
				timer.Reset(caseGuard)
			case "end":
				i, _ := strconv.Atoi(f[2])
				o := outcome(f[3])
				detail := ""
				if len(f) > 4 {
					detail = f[4]
				}
				tl.n++
				tl.counts[o]++
				if o != handled {
					tl.notes = append(tl.notes, fmt.Sprintf("%s: case %d %s: %s: %s", name, i, cases[i].name, o, detail))
				}
				started = -1
				from = i + 1
			}
		}
		err := cmd.Wait()
		timer.Stop()
		if started >= 0 { // died inside a case
			tl.n++
			tl.counts[crash]++
			tl.notes = append(tl.notes, fmt.Sprintf("%s: case %d %s: crash: %v; stderr tail: %s", name, started, cases[started].name, err, tail(stderr.String(), 400)))
			from = started + 1
			continue
		}
		if err != nil {
			t.Fatalf("%s child exited with %v after case %d; stderr: %s", name, err, from-1, tail(stderr.String(), 2000))
		}
		break
	}
	return tl
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return strings.ReplaceAll(s, "\n", " | ")
}

// caseGuard is how long one case (or the child's setup) may run before its
// child is killed and the case counted as a crash: a case takes seconds.
const caseGuard = 10 * time.Minute

// minCases is the floor the issue sets: at least 150 bad inputs per backend.
const minCases = 150

func TestAdversarial(t *testing.T) {
	if n := len(allCases()); n < minCases {
		t.Fatalf("%d cases, want at least %d", n, minCases)
	}
	// Every registered backend: one that does not work here skips loudly,
	// or fails when AG_REQUIRE_DEVICES names it.
	for _, drv := range backend.Drivers() {
		name := drv.Name
		t.Run(name, func(t *testing.T) {
			if !drv.OK {
				testenv.SkipDevice(t, name, drv.Why)
			}
			tl := runBackend(t, name)
			line := fmt.Sprintf("adversarial: %-11s %d cases: crashes %d, bare panics %d, silent wrong %d, data lost %d",
				name, tl.n, tl.counts[crash], tl.counts[bare], tl.counts[wrong], tl.counts[lost])
			fmt.Println(line)
			for _, n := range tl.notes {
				t.Error(n)
			}
			if tl.n != len(allCases()) {
				t.Errorf("%s: %d of %d cases reported", name, tl.n, len(allCases()))
			}
		})
	}
}
