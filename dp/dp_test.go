package dp_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/dp"
	"github.com/ag-go/ag/nn"
)

// open opens device name for t, skipping loudly (testenv) when it cannot.
func open(t testing.TB, name string) *core.Device {
	t.Helper()
	d, err := core.Open(name)
	if err == nil {
		_, err = d.Tensor([]float32{1}, 1).Data() // Open is lazy: make it reach the backend
	}
	if err != nil {
		testenv.SkipDevice(t, name, err.Error())
	}
	t.Cleanup(func() { d.Close() })
	return d
}

var sizes = []int{6, 16, 16, 3}

func mlp(dev *core.Device) nn.Sequential { return nn.MLP(dev, sizes, core.Tanh, nn.NewRNG(7)) }

func adam(ps []*core.Tensor) nn.Optimizer { return nn.NewAdam(ps, 0.01) }

func mse[M nn.Module](m M, in []*core.Tensor) *core.Tensor {
	return nn.MSELoss(m.Forward(in[0]), in[1])
}

// batch is global batch number k of b rows: inputs [b, 6], targets [b, 3].
func batch(k, b int) (x, y core.Input) {
	rng := nn.NewRNG(uint64(100 + k))
	xs := make([]float32, b*sizes[0])
	ys := make([]float32, b*sizes[3])
	for i := range xs {
		xs[i] = float32(rng.NormFloat64())
	}
	for i := range ys {
		ys[i] = float32(rng.NormFloat64())
	}
	return core.In(xs, b, sizes[0]), core.In(ys, b, sizes[3])
}

func values(t testing.TB, ps []*core.Tensor) [][]float32 {
	t.Helper()
	out := make([][]float32, len(ps))
	for i, p := range ps {
		v, err := p.Data()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

// maxDiff is the largest |a-b| over the parameters, and the largest |a|.
func maxDiff(a, b [][]float32) (d, scale float64) {
	for i := range a {
		for k := range a[i] {
			d = max(d, math.Abs(float64(a[i][k])-float64(b[i][k])))
			scale = max(scale, math.Abs(float64(a[i][k])))
		}
	}
	return d, scale
}

// reference trains the MLP on one device on the global batches, as the
// single-device step: the spec dp must match.
func reference(t testing.TB, dev *core.Device, steps, b int) (params [][]float32, losses []float32) {
	m := mlp(dev)
	opt := adam(m.Params())
	for k := range steps {
		x, y := batch(k, b)
		opt.ZeroGrad()
		l := nn.MSELoss(m.Forward(dev.Tensor(x.Data, x.Shape...)), dev.Tensor(y.Data, y.Shape...))
		if err := l.Backward(); err != nil {
			t.Fatal(err)
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		v, err := l.Item()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, v)
	}
	return values(t, m.Params()), losses
}

// TestEquivalence trains on two devices of the test device's backend
// (AG_TEST_DEVICE, cpu by default) lazily and captured (and on one and
// three), and checks the
// parameters and losses against single-device training on the same global
// batches, and that the replicas are equal bit for bit. The batch of 7
// rows splits 4 + 3 (3 + 2 + 2), so a wrong shard weighting (equal
// weights) fails it.
func TestEquivalence(t *testing.T) {
	name := testenv.Device()
	const steps, b = 12, 7
	ref, refLoss := reference(t, open(t, name), steps, b)
	for _, c := range []struct {
		n       int
		capture bool
	}{{2, false}, {2, true}, {1, false}, {3, true}} {
		capture := c.capture
		t.Run(fmt.Sprintf("devices=%d/capture=%t", c.n, c.capture), func(t *testing.T) {
			var devs []*core.Device
			for range c.n {
				devs = append(devs, open(t, name))
			}
			tr, err := dp.New(devs, mlp, adam, mse, dp.Options{Capture: capture})
			if err != nil {
				t.Fatal(err)
			}
			for k := range steps {
				x, y := batch(k, b)
				l, err := tr.Step(x, y)
				if err != nil {
					t.Fatal(err)
				}
				if d := math.Abs(float64(l - refLoss[k])); d > 1e-5*max(1, math.Abs(float64(refLoss[k]))) {
					t.Errorf("step %d: loss %v, single device %v", k, l, refLoss[k])
				}
			}
			d, scale := maxDiff(values(t, tr.Model(0).Params()), ref)
			if d > 1e-5*max(1, scale) {
				t.Errorf("parameters differ from single-device training by %g (largest %g)", d, scale)
			}
			div, err := tr.Divergence()
			if err != nil {
				t.Fatal(err)
			}
			if div != 0 {
				t.Errorf("replicas on one backend differ by %g, want equal bits", div)
			}
			if capture {
				st := devs[len(devs)-1].Stats()
				if st.Compiles > 4 {
					t.Errorf("captured: device 1 compiled %d programs in %d steps, want the two captures' recordings once (a resync may add a few)", st.Compiles, steps)
				}
			}
		})
	}
}

// TestMixedBackends trains on cpu and webgpu (lavapipe here), and on cpu
// and AG_TEST_DEVICE when that is another backend: the result
// matches single-device training within f32 tolerance, the replicas drift
// by rounding only, and Resync makes them equal.
func TestMixedBackends(t *testing.T) {
	others := []string{"webgpu"}
	if d := testenv.Device(); d != "cpu" && d != "webgpu" {
		others = append(others, d) // AG_TEST_DEVICE=ggml-vulkan: cpu + ggml-vulkan too
	}
	for _, other := range others {
		t.Run(other, func(t *testing.T) { mixed(t, other) })
	}
}

func mixed(t *testing.T, other string) {
	const steps, b = 12, 9
	cpu := open(t, "cpu")
	gpu := open(t, other)
	ref, _ := reference(t, open(t, "cpu"), steps, b)
	for _, capture := range []bool{false, true} {
		t.Run(map[bool]string{false: "lazy", true: "captured"}[capture], func(t *testing.T) {
			tr, err := dp.New([]*core.Device{cpu, gpu}, mlp, adam, mse, dp.Options{Capture: capture, ResyncEvery: -1})
			if err != nil {
				t.Fatal(err)
			}
			for k := range steps {
				x, y := batch(k, b)
				if _, err := tr.Step(x, y); err != nil {
					t.Fatal(err)
				}
			}
			d, scale := maxDiff(values(t, tr.Model(0).Params()), ref)
			if d > 1e-4*max(1, scale) {
				t.Errorf("parameters differ from single-device training by %g (largest %g)", d, scale)
			}
			div, err := tr.Divergence()
			if err != nil {
				t.Fatal(err)
			}
			if div > 1e-4 {
				t.Errorf("cpu and %s replicas drifted by %g in %d steps", other, div, steps)
			}
			t.Logf("cpu and %s: drift after %d steps without resync: %g", other, steps, div)
			if err := tr.Resync(); err != nil {
				t.Fatal(err)
			}
			if div, err := tr.Divergence(); err != nil || div != 0 {
				t.Errorf("after Resync: divergence %g, %v; want 0", div, err)
			}
		})
	}
}

// bnNet is a small model with BatchNorm between two Linear layers. The
// first has no bias: BatchNorm cancels it, so its gradient is rounding
// noise, which Adam would scale up to full steps of either sign.
type bnNet struct {
	L1 *nn.Linear
	BN *nn.BatchNorm
	L2 *nn.Linear
}

func newBN(dev *core.Device) *bnNet {
	rng := nn.NewRNG(3)
	return &bnNet{nn.NewLinear(dev, 6, 8, false, rng), nn.NewBatchNorm1d(dev, 8, 1e-5, 0.1, true), nn.NewLinear(dev, 8, 3, true, rng)}
}

func (n *bnNet) Forward(x *core.Tensor) *core.Tensor {
	return n.L2.Forward(core.ReLU(n.BN.Forward(n.L1.Forward(x))))
}

func (n *bnNet) Params() []*core.Tensor {
	return append(append(n.L1.Params(), n.BN.Params()...), n.L2.Params()...)
}

// TestBatchNorm checks the documented BatchNorm semantics: per-replica
// batch statistics (DDP without SyncBatchNorm), so a step equals
// single-device gradient accumulation over the same shards, each loss
// weighted by its share; the running statistics are each replica's until
// Resync copies replica 0's.
func TestBatchNorm(t *testing.T) {
	name := testenv.Device()
	const steps, b = 6, 9
	shards := dp.Shards(b, 2)
	// the reference: accumulation over the two shards on one device
	dev := open(t, name)
	m := newBN(dev)
	opt := adam(m.Params())
	for k := range steps {
		x, y := batch(k, b)
		opt.ZeroGrad()
		start := 0
		for _, rows := range shards {
			xs := dev.Tensor(x.Data[start*6:(start+rows)*6], rows, 6)
			ys := dev.Tensor(y.Data[start*3:(start+rows)*3], rows, 3)
			l := core.Scale(nn.MSELoss(m.Forward(xs), ys), float32(rows)/b)
			if err := l.Backward(); err != nil {
				t.Fatal(err)
			}
			start += rows
		}
		if err := opt.Step(); err != nil {
			t.Fatal(err)
		}
		if err := dev.Sync(m.Params()...); err != nil {
			t.Fatal(err)
		}
	}
	ref := values(t, m.Params())
	for _, capture := range []bool{false, true} {
		t.Run(map[bool]string{false: "lazy", true: "captured"}[capture], func(t *testing.T) {
			tr, err := dp.New([]*core.Device{open(t, name), open(t, name)}, newBN, adam, mse, dp.Options{Capture: capture})
			if err != nil {
				t.Fatal(err)
			}
			for k := range steps {
				x, y := batch(k, b)
				if _, err := tr.Step(x, y); err != nil {
					t.Fatal(err)
				}
			}
			d, scale := maxDiff(values(t, tr.Model(0).Params()), ref)
			if d > 1e-5*max(1, scale) {
				t.Errorf("parameters differ from accumulation over the shards by %g (largest %g)", d, scale)
			}
			r0, r1 := values(t, nn.Buffers(tr.Model(0))), values(t, nn.Buffers(tr.Model(1)))
			if d, _ := maxDiff(r0, r1); d == 0 {
				t.Errorf("the replicas' running statistics are equal before Resync: each should have its own shards'")
			}
			if err := tr.Resync(); err != nil {
				t.Fatal(err)
			}
			r1 = values(t, nn.Buffers(tr.Model(1)))
			if d, _ := maxDiff(r0, r1); d != 0 {
				t.Errorf("after Resync the running statistics differ by %g", d)
			}
		})
	}
}

// TestDeviceClosed closes a replica's device between steps and inside
// them (from another goroutine): a closed device reopens on next use with
// its values, so training goes on and still matches the single device.
func TestDeviceClosed(t *testing.T) {
	name := testenv.Device()
	const steps, b = 10, 8
	ref, _ := reference(t, open(t, name), steps, b)
	for _, c := range []struct {
		n       int
		capture bool
	}{{2, false}, {2, true}, {3, true}} {
		capture := c.capture
		t.Run(fmt.Sprintf("devices=%d/capture=%t", c.n, c.capture), func(t *testing.T) {
			var devs []*core.Device
			for range c.n {
				devs = append(devs, open(t, name))
			}
			tr, err := dp.New(devs, mlp, adam, mse, dp.Options{Capture: capture})
			if err != nil {
				t.Fatal(err)
			}
			for k := range steps {
				x, y := batch(k, b)
				if k%3 == 1 {
					if err := devs[1].Close(); err != nil {
						t.Fatal(err)
					}
				}
				done := make(chan error, 1)
				if k%3 == 2 {
					go func() { done <- devs[0].Close() }()
				} else {
					done <- nil
				}
				if _, err := tr.Step(x, y); err != nil {
					t.Fatalf("step %d: %v", k, err)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			d, scale := maxDiff(values(t, tr.Model(1).Params()), ref)
			if d > 1e-5*max(1, scale) {
				t.Errorf("parameters differ from single-device training by %g (largest %g)", d, scale)
			}
			if div, err := tr.Divergence(); err != nil || div != 0 {
				t.Errorf("divergence %g, %v; want 0", div, err)
			}
		})
	}
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one with %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not say %q", err, p)
		}
	}
}

// TestErrors checks the refusals: each names the function and the values,
// and leaves the replicas as they were.
func TestErrors(t *testing.T) {
	name := testenv.Device()
	a, b := open(t, name), open(t, name)
	devs := []*core.Device{a, b}

	_, err := dp.New([]*core.Device{a, a}, mlp, adam, mse, dp.Options{})
	wantErr(t, err, "dp.New", "devices 0 and 1")

	_, err = dp.New(devs, func(dev *core.Device) nn.Sequential {
		hidden := 16
		if dev == b {
			hidden = 17
		}
		return nn.MLP(dev, []int{6, hidden, 3}, core.Tanh, nn.NewRNG(1))
	}, adam, mse, dp.Options{})
	wantErr(t, err, "dp.New", "parameter 0", "[6 17]", "[6 16]", "replica 1")

	_, err = dp.New(devs, func(dev *core.Device) nn.Sequential {
		if dev == b {
			return nn.MLP(dev, []int{6, 3}, core.Tanh, nn.NewRNG(1))
		}
		return mlp(dev)
	}, adam, mse, dp.Options{})
	wantErr(t, err, "dp.New", "2 parameters", "6")

	tr, err := dp.New(devs, mlp, adam, mse, dp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := values(t, tr.Model(0).Params())
	x, y := batch(0, 1)
	_, err = tr.Step(x, y)
	wantErr(t, err, "dp.Trainer.Step", "1 rows", "2 devices")

	x, _ = batch(0, 4)
	_, y = batch(0, 5)
	_, err = tr.Step(x, y)
	wantErr(t, err, "dp.Trainer.Step", "input 1", "5 rows", "4")

	// a parameter frozen on one replica only
	tr.Model(1)[0].(*nn.Linear).B.SetRequiresGrad(false)
	x, y = batch(0, 4)
	_, err = tr.Step(x, y)
	wantErr(t, err, "dp.Trainer.Step", "parameter 1", "freeze")
	tr.Model(1)[0].(*nn.Linear).B.SetRequiresGrad(true)

	// a loss that panics on one replica's shard (a shape mistake)
	bad, err := dp.New(devs, mlp, adam, func(m nn.Sequential, in []*core.Tensor) *core.Tensor {
		if in[0].Device() == b {
			return m.Forward(in[0]) // not one element
		}
		return mse(m, in)
	}, dp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Step(x, y)
	wantErr(t, err, "dp.Trainer.Step", "replica 1", "one element", "no replica was updated")

	for _, tr := range []*dp.Trainer[nn.Sequential]{tr, bad} {
		if d, _ := maxDiff(values(t, tr.Model(0).Params()), before); d != 0 {
			t.Errorf("a refused step changed replica 0's parameters by %g", d)
		}
		if div, err := tr.Divergence(); err != nil || div != 0 {
			t.Errorf("divergence %g, %v after refused steps; want 0", div, err)
		}
		if n := tr.Optimizer(1).StepCount(); n != 0 {
			t.Errorf("step count %d after refused steps, want 0", n)
		}
	}
}

// BenchmarkStep is the 4x1024 MLP's lazy step at global batches of 256
// and 4096 on one device of AG_TEST_DEVICE's backend (cpu by default) with
// plain nn, and on one and two devices with dp: dp on two against nn on
// one is what data parallelism gains or costs, the host reduction
// included (two cpu devices share one machine's cores; two GPUs do not).
func BenchmarkStep(b *testing.B) {
	name := testenv.Device()
	sizes := []int{1024, 1024, 1024, 1024, 1024}
	build := func(dev *core.Device) nn.Sequential { return nn.MLP(dev, sizes, core.ReLU, nn.NewRNG(1)) }
	for _, rows := range []int{256, 4096} {
		xs := make([]float32, rows*1024)
		for i := range xs {
			xs[i] = float32(i%7) / 7
		}
		x, y := core.In(xs, rows, 1024), core.In(xs, rows, 1024)
		b.Run(fmt.Sprintf("batch=%d/nn", rows), func(b *testing.B) {
			dev := open(b, name)
			m := build(dev)
			opt := adam(m.Params())
			for b.Loop() {
				opt.ZeroGrad()
				l := nn.MSELoss(m.Forward(dev.Tensor(x.Data, x.Shape...)), dev.Tensor(y.Data, y.Shape...))
				if err := l.Backward(); err != nil {
					b.Fatal(err)
				}
				if err := opt.Step(); err != nil {
					b.Fatal(err)
				}
				if _, err := l.Item(); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, n := range []int{1, 2} {
			b.Run(fmt.Sprintf("batch=%d/dp/devices=%d", rows, n), func(b *testing.B) {
				var devs []*core.Device
				for range n {
					devs = append(devs, open(b, name))
				}
				tr, err := dp.New(devs, build, adam, mse, dp.Options{})
				if err != nil {
					b.Fatal(err)
				}
				for b.Loop() {
					if _, err := tr.Step(x, y); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

var errInjected = errors.New("injected update failure")

// failing is Adam whose Step fails while fail is set: an update that fails
// on one replica only.
type failing struct {
	*nn.Adam
	fail bool
}

func (f *failing) Step() error {
	if f.fail {
		return errInjected
	}
	return f.Adam.Step()
}

// TestUpdateFails fails the update on replica 1 only: Step reports it, and
// replica 1 gets replica 0's update, so the replicas are equal and training
// still matches the single device.
func TestUpdateFails(t *testing.T) {
	name := testenv.Device()
	const steps, b = 5, 6
	ref, _ := reference(t, open(t, name), steps, b)
	a, c := open(t, name), open(t, name)
	var opts []*failing
	tr, err := dp.New([]*core.Device{a, c}, mlp, func(ps []*core.Tensor) nn.Optimizer {
		o := &failing{Adam: nn.NewAdam(ps, 0.01)}
		opts = append(opts, o)
		return o
	}, mse, dp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for k := range steps {
		x, y := batch(k, b)
		opts[1].fail = k == 2
		_, err := tr.Step(x, y)
		if k == 2 {
			wantErr(t, err, "dp.Trainer.Step", "update failed on replica 1", "injected", "copied to the others")
			if !errors.Is(err, errInjected) {
				t.Errorf("%v does not wrap the optimizer's error", err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		if div, err := tr.Divergence(); err != nil || div != 0 {
			t.Fatalf("step %d: divergence %g, %v; want 0", k, div, err)
		}
	}
	d, scale := maxDiff(values(t, tr.Model(1).Params()), ref)
	if d > 1e-5*max(1, scale) {
		t.Errorf("parameters differ from single-device training by %g (largest %g)", d, scale)
	}
	if n := tr.Optimizer(1).StepCount(); n != steps {
		t.Errorf("replica 1's step count %d, want %d", n, steps)
	}
}

// TestResyncEvery perturbs replica 1 and checks that the periodic resync
// (ResyncEvery) makes it replica 0 again at the right step, not before.
func TestResyncEvery(t *testing.T) {
	name := testenv.Device()
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%t", capture), func(t *testing.T) {
			tr, err := dp.New([]*core.Device{open(t, name), open(t, name)}, mlp, adam, mse, dp.Options{ResyncEvery: 3, Capture: capture})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 7 {
				x, y := batch(k, 4)
				if k == 1 { // a parameter and a moment of replica 1 only
					if err := tr.Model(1).Params()[0].WriteAt(0, []float32{5}); err != nil {
						t.Fatal(err)
					}
					st, err := tr.Optimizer(1).(*nn.Adam).State()
					if err != nil {
						t.Fatal(err)
					}
					if err := st[1].WriteAt(0, []float32{1, -1, 1}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := tr.Step(x, y); err != nil {
					t.Fatal(err)
				}
				div, err := tr.Divergence()
				if err != nil {
					t.Fatal(err)
				}
				// equal parameters after the steps that follow the resync
				// mean that it copied the moments too (and that a capture
				// replays the copied values)
				if k == 1 && div == 0 {
					t.Errorf("step %d: replica 1 was resynced before step 3", k)
				}
				if k >= 2 && div != 0 {
					t.Errorf("step %d: divergence %g after the resync, want 0", k, div)
				}
			}
		})
	}
}

// TestClip checks Options.MaxGradNorm against nn.ClipGradNorm on one
// device (a limit below the gradients' norm, so every step clips), and
// that a NaN gradient is refused before any replica is updated.
func TestClip(t *testing.T) {
	name := testenv.Device()
	const steps, b, limit = 6, 7, 0.05
	dev := open(t, name)
	m := mlp(dev)
	opt := adam(m.Params())
	var norms []float32
	for k := range steps {
		x, y := batch(k, b)
		opt.ZeroGrad()
		l := nn.MSELoss(m.Forward(dev.Tensor(x.Data, x.Shape...)), dev.Tensor(y.Data, y.Shape...))
		if err := l.Backward(); err != nil {
			t.Fatal(err)
		}
		norm, err := nn.ClipGradNorm(opt, limit)
		if err != nil {
			t.Fatal(err)
		}
		norms = append(norms, norm)
	}
	ref := values(t, m.Params())
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("devices=%d", n), func(t *testing.T) {
			var devs []*core.Device
			for range n {
				devs = append(devs, open(t, name))
			}
			tr, err := dp.New(devs, mlp, adam, mse, dp.Options{MaxGradNorm: limit, Capture: n == 2})
			if err != nil {
				t.Fatal(err)
			}
			for k := range steps {
				x, y := batch(k, b)
				if _, err := tr.Step(x, y); err != nil {
					t.Fatal(err)
				}
				if g := tr.GradNorm(); math.Abs(g-float64(norms[k])) > 1e-5*float64(norms[k]) || g <= limit {
					t.Errorf("step %d: norm %v, single device %v (limit %v)", k, g, norms[k], limit)
				}
			}
			d, scale := maxDiff(values(t, tr.Model(0).Params()), ref)
			if d > 1e-5*max(1, scale) {
				t.Errorf("parameters differ from single-device clipped training by %g (largest %g)", d, scale)
			}
			before := values(t, tr.Model(n-1).Params())
			x, y := batch(0, b)
			x.Data = append([]float32(nil), x.Data...)
			x.Data[len(x.Data)-1] = float32(math.NaN()) // the last replica's shard
			_, err = tr.Step(x, y)
			if !errors.Is(err, nn.ErrNonFiniteNorm) {
				t.Fatalf("a NaN gradient: %v, want nn.ErrNonFiniteNorm", err)
			}
			wantErr(t, err, "dp.Trainer.Step", "no replica was updated")
			if d, _ := maxDiff(values(t, tr.Model(n-1).Params()), before); d != 0 {
				t.Errorf("the refused step changed the parameters by %g", d)
			}
		})
	}
	if _, err := dp.New([]*core.Device{dev}, mlp, adam, mse, dp.Options{MaxGradNorm: float32(math.NaN())}); err == nil {
		t.Error("MaxGradNorm NaN accepted")
	}
}

// TestFrozen freezes a parameter on every replica (it stays as it is, the
// others train) and then on one replica only (an error naming it, nothing
// updated), lazily and captured: a captured step records again for each.
func TestFrozen(t *testing.T) {
	name := testenv.Device()
	for _, capture := range []bool{false, true} {
		t.Run(fmt.Sprintf("capture=%t", capture), func(t *testing.T) {
			tr, err := dp.New([]*core.Device{open(t, name), open(t, name)}, mlp, adam, mse, dp.Options{Capture: capture})
			if err != nil {
				t.Fatal(err)
			}
			x, y := batch(0, 6)
			if _, err := tr.Step(x, y); err != nil {
				t.Fatal(err)
			}
			bias := func(i int) *core.Tensor { return tr.Model(i)[0].(*nn.Linear).B }
			for i := range 2 {
				bias(i).SetRequiresGrad(false)
			}
			before := values(t, tr.Model(0).Params())
			for k := range 3 {
				x, y := batch(k, 6)
				if _, err := tr.Step(x, y); err != nil {
					t.Fatal(err)
				}
			}
			after := values(t, tr.Model(0).Params())
			if d, _ := maxDiff(after[1:2], before[1:2]); d != 0 {
				t.Errorf("the frozen bias moved by %g", d)
			}
			if d, _ := maxDiff(after[:1], before[:1]); d == 0 {
				t.Errorf("the weights did not train")
			}
			if div, err := tr.Divergence(); err != nil || div != 0 {
				t.Errorf("divergence %g, %v; want 0", div, err)
			}
			bias(0).SetRequiresGrad(true)
			_, err = tr.Step(x, y)
			wantErr(t, err, "dp.Trainer.Step", "parameter 1", "replica 0", "replica 1", "freeze")
			if d, _ := maxDiff(values(t, tr.Model(0).Params()), after); d != 0 {
				t.Errorf("the refused step changed the parameters by %g", d)
			}
		})
	}
}
