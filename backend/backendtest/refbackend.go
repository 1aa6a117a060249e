package backendtest

import (
	"fmt"
	"math"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/reference"
)

// refBackend is a backend that stores f32 and runs graphs through Eval. The
// whole suite must pass on it (no false failures from f32 storage), and a
// deliberately broken variant (fault, set by the suite's own tests only)
// must fail (the suite can catch bugs).
type refBackend struct {
	name  string
	fault string // "": correct; "swap": swap the ends of each output; "scale": scale outputs by 1+1e-4
	used  int
}

type refBuf struct{ data []float32 }

func (b *refBuf) Len() int { return len(b.data) }

type refDriver struct{ name, brk string }

// ReferenceDriver is a driver whose backend stores f32 and runs every graph
// through Eval in float64, named name in its Caps (register it under that
// name, so that core reopens it after a Close). core on it is the
// reference a backend's run of core's graphs is compared with (package
// edge); the whole suite passes on it (TestSuiteOnReference).
func ReferenceDriver(name string) backend.Driver { return refDriver{name: name} }

func (d refDriver) Open() (backend.Backend, error) {
	return &refBackend{name: d.name, fault: d.brk}, nil
}
func (d refDriver) Available() backend.Availability {
	return backend.Availability{OK: true, Why: "float64 reference in a test"}
}

// Caps declares every composite native: Eval computes each from its
// float64 definition (the suite's decomposed cases check Decompose); and
// every rank: Eval computes ranks 5 and 6 as they are, the values the
// other backends' lowered graphs (plan.Expand) are checked against.
func (r *refBackend) Caps() backend.Caps {
	return backend.Caps{Name: r.name, Device: "host", Composites: composites, KernelRank: backend.MaxRank}
}

// composites are the composite ops of the IR.
var composites = func() []backend.Op {
	var out []backend.Op
	for _, op := range backend.Ops() {
		if op.IsComposite() {
			out = append(out, op)
		}
	}
	return out
}()

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
