package backendtest

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/reference"
	"github.com/ag-go/ag/internal/testenv"
)

// refBackend is a backend that stores f32 and runs graphs through Eval. The
// whole suite must pass on it (no false failures from f32 storage), and a
// deliberately broken variant must fail (the suite can catch bugs).
type refBackend struct {
	name  string
	fault string // "": correct; "swap": swap the ends of each output; "scale": scale outputs by 1+1e-4
	used  int
}

type refBuf struct{ data []float32 }

func (b *refBuf) Len() int { return len(b.data) }

func init() {
	backend.Register("backendtest-ref", 0, refDriver{""})
	backend.Register("backendtest-broken", 0, refDriver{os.Getenv("BACKENDTEST_BREAK")})
}

type refDriver struct{ brk string }

func (d refDriver) Open() (backend.Backend, error) {
	return &refBackend{name: "ref", fault: d.brk}, nil
}
func (d refDriver) Available() backend.Availability {
	return backend.Availability{OK: true, Why: "float64 reference in a test"}
}

func (r *refBackend) Caps() backend.Caps { return backend.Caps{Name: r.name, Device: "host"} }
func (r *refBackend) Alloc(n int) (backend.Buffer, error) {
	if n < 0 {
		return nil, fmt.Errorf("ref.Alloc(%d): negative", n)
	}
	r.used += n
	return &refBuf{make([]float32, n)}, nil
}
func (r *refBackend) Free(b backend.Buffer) { r.used -= b.Len() }
func (r *refBackend) Write(b backend.Buffer, off int, src []float32) error {
	d := b.(*refBuf).data
	if off < 0 || len(src) > len(d) || off > len(d)-len(src) { // off+len may overflow
		return fmt.Errorf("ref.Write(%d, %d values) of %d", off, len(src), len(d))
	}
	copy(d[off:], src)
	return nil
}
func (r *refBackend) Read(b backend.Buffer, off int, dst []float32) error {
	d := b.(*refBuf).data
	if off < 0 || len(dst) > len(d) || off > len(d)-len(dst) { // off+len may overflow
		return fmt.Errorf("ref.Read(%d, %d values) of %d", off, len(dst), len(d))
	}
	copy(dst, d[off:])
	return nil
}
func (r *refBackend) Memory() (uint64, uint64, error) {
	return 1<<34 - uint64(r.used)*4, 1 << 34, nil
}
func (r *refBackend) Compile(g *backend.Graph) (backend.Program, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return &refProg{r, g}, nil
}
func (r *refBackend) Close() error { return nil }

type refProg struct {
	r *refBackend
	g *backend.Graph
}

func (p *refProg) Release() {}
func (p *refProg) Run(bufs []backend.Buffer) (backend.RunInfo, error) {
	if len(bufs) != p.g.NumArgs {
		return backend.RunInfo{}, fmt.Errorf("ref.Run: %d args, want %d", len(bufs), p.g.NumArgs)
	}
	args := make([][]float64, len(bufs))
	for i, b := range bufs {
		args[i] = to64([][]float32{b.(*refBuf).data})[0]
	}
	if _, err := Eval(p.g, args); err != nil {
		return backend.RunInfo{}, err
	}
	for _, o := range p.g.Outputs {
		a := args[o.Arg][:backend.NumElems(p.g.Nodes[o.Node].Shape)]
		switch p.r.fault {
		case "swap":
			a[0], a[len(a)-1] = a[len(a)-1], a[0]
		case "scale":
			for j := range a {
				a[j] *= 1 + 1e-4
			}
		case "nan0": // NaN turned into a number, as webgpu's relu and max did
			for j := range a {
				if math.IsNaN(a[j]) {
					a[j] = 0
				}
			}
		case "infsign": // an infinity of the wrong sign
			for j := range a {
				if math.IsInf(a[j], 0) {
					a[j] = -a[j]
				}
			}
		}
	}
	for i, b := range bufs {
		d := b.(*refBuf).data
		for j, x := range args[i] {
			d[j] = reference.Narrow(x)
		}
	}
	return backend.RunInfo{Launches: 1}, nil
}

// TestSuiteOnReference runs the whole suite on the Eval-backed backend.
func TestSuiteOnReference(t *testing.T) { Run(t, "backendtest-ref") }

// TestSuiteSkipsUnknown: an unregistered name is a skip, not a failure.
func TestSuiteSkipsUnknown(t *testing.T) {
	t.Setenv(testenv.SkipLogEnv, "") // an expected skip: keep it out of make test's list
	ok := t.Run("unknown", func(t *testing.T) {
		Run(t, "no-such-backend")
		t.Error("Run did not skip an unregistered driver")
	})
	if !ok {
		t.Fatal("Run failed on an unregistered driver instead of skipping")
	}
}

// TestBrokenHelper is run by TestSuiteCatchesBugs in a child process.
func TestBrokenHelper(t *testing.T) {
	if os.Getenv("BACKENDTEST_BREAK") == "" {
		t.Skip("only run as a child of TestSuiteCatchesBugs")
	}
	Run(t, "backendtest-broken")
}

// TestSuiteCatchesBugs breaks the reference backend in small ways and checks
// the suite fails on them: an index bug (swapped elements), a relative
// error of 1e-4 (well inside what a plain visual check would accept), a NaN
// turned into 0 and an infinity of the wrong sign.
func TestSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns test processes")
	}
	cases := []struct{ brk, sub string }{
		{"swap", "matmul/transB"}, {"swap", "get_rows"}, {"swap", "sum/axis2"}, {"swap", "permute"},
		{"swap", "graph/mlp-forward"}, {"scale", "add/broadcast"}, {"scale", "exp"},
		{"scale", "adamw/3steps"}, {"scale", "softmax/large"}, {"scale", "graph/reuse-new-data"},
		{"nan0", "special/relu"}, {"nan0", "special/max"}, {"nan0", "special/matmul"},
		{"infsign", "special/exp"}, {"infsign", "special/binary"},
	}
	for _, c := range cases {
		pat := "^TestBrokenHelper$"
		for _, part := range strings.Split(c.sub, "/") {
			pat += "/^" + part + "$"
		}
		cmd := exec.Command(os.Args[0], "-test.run", pat, "-test.short")
		cmd.Env = append(os.Environ(), "BACKENDTEST_BREAK="+c.brk)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "out of tolerance") {
			t.Errorf("%s broken by %s: suite did not fail with 'out of tolerance' (err %v):\n%s", c.sub, c.brk, err, out)
		}
	}
}
