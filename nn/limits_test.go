package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
)

// limitDevices are the devices the limits regression runs on: cpu and
// webgpu always (issue 10 item 1 was a wrong sum on webgpu), and the
// AG_TEST_DEVICE one.
func limitDevices() []string {
	devs := []string{"cpu", "webgpu"}
	if d := testDevice(); d != "cpu" && d != "webgpu" {
		devs = append(devs, d)
	}
	return devs
}

// openLimitDev opens name or skips, saying why, when its driver is not
// available on this machine.
func openLimitDev(t *testing.T, name string) *core.Device {
	t.Helper()
	for _, d := range backend.Drivers() {
		if d.Name == name && !d.OK {
			t.Skipf("device %q not available here: %s", name, d.Why)
		}
	}
	dev, err := core.Open(name)
	if err != nil {
		t.Fatalf("core.Open(%q): %v", name, err)
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// checkAll reads t and compares every element with want within rel.
func checkAll(t *testing.T, what string, x *core.Tensor, want, rel float64) {
	t.Helper()
	got, err := x.Data()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for i, g := range got {
		if math.Abs(float64(g)-want) > rel*math.Abs(want) {
			t.Fatalf("%s: element %d of %d is %g, want %g", what, i, len(got), g, want)
		}
	}
}

// TestReductionsOverMillionRows is issue 10 item 1 as filed: a column sum,
// a column mean and a Linear layer's bias and weight gradients over 1M
// rows. On lavapipe the column sum returned 524280 (65535 loop iterations
// of 8 lanes) instead of 1e6.
func TestReductionsOverMillionRows(t *testing.T) {
	const rows = 1_000_000
	for _, name := range limitDevices() {
		t.Run(name, func(t *testing.T) {
			dev := openLimitDev(t, name)
			t.Run("SumAxis", func(t *testing.T) {
				checkAll(t, "SumAxis(Full(1, 1e6, 4), 0)", core.SumAxis(dev.Full(1, rows, 4), 0, false), rows, 0)
			})
			t.Run("MeanAxis", func(t *testing.T) {
				// The sum is exact; the mean rounds once (times 1/1e6 in f32).
				checkAll(t, "MeanAxis(Full(0.5, 1e6, 4), 0)", core.MeanAxis(dev.Full(0.5, rows, 4), 0, false), 0.5, 1e-6)
			})
			t.Run("LinearGrad", func(t *testing.T) {
				l := NewLinear(dev, 4, 3, true, rand.New(rand.NewPCG(10, 1)))
				// d sum(x·W + b) / db = 1e6 per output; / dW = sum of x's column = 1e6.
				loss := core.Sum(l.Forward(dev.Full(1, rows, 4)))
				if err := loss.Backward(); err != nil {
					t.Fatal(err)
				}
				checkAll(t, "bias gradient", l.B.Grad(), rows, 0)
				checkAll(t, "weight gradient", l.W.Grad(), rows, 0)
			})
		})
	}
}
