package workload

import (
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// testMLP is a small MLP on a cpu device of its own, closed when the test
// ends.
func testMLP(t *testing.T) *MLP {
	t.Helper()
	dev, err := core.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.Close() })
	m, err := New(dev, Config{Width: 32, Depth: 3, Batch: 8, Seed: 3, LR: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The three execution modes compute the same training run.
func TestModesAgree(t *testing.T) {
	var losses [3][]float32
	for i, mode := range []Mode{Eager, Lazy, Captured} {
		m := testMLP(t)
		for range 12 {
			l, err := m.StepMode(mode)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			losses[i] = append(losses[i], l)
		}
	}
	for k := range losses[0] {
		for i := 1; i < 3; i++ {
			if math.Abs(float64(losses[i][k]-losses[0][k])) > 1e-5*(1+math.Abs(float64(losses[0][k]))) {
				t.Errorf("step %d: mode %d loss %g, eager %g", k, i, losses[i][k], losses[0][k])
			}
		}
	}
	if !(losses[1][11] < losses[1][0]) {
		t.Errorf("loss did not fall: %v", losses[1])
	}
}

// Steps whose loss is not read (StepUnread) train as StepMode's do, in
// each mode: the loss of a step read afterwards is the same.
func TestStepUnread(t *testing.T) {
	for _, mode := range []Mode{Eager, Lazy, Captured} {
		var last [2]float32
		for i, unread := range []bool{false, true} {
			m := testMLP(t)
			var err error
			for k := range 7 {
				if unread && k > 0 && k < 6 {
					err = m.StepUnread(mode)
				} else {
					last[i], err = m.StepMode(mode)
				}
				if err != nil {
					t.Fatalf("%s unread %t step %d: %v", mode, unread, k, err)
				}
			}
		}
		if last[1] != last[0] {
			t.Errorf("%s: loss %v after 5 unread steps, %v after read ones", mode, last[1], last[0])
		}
	}
}

// TimedLater times n groups of every steps, runs the groups that fill and
// drain its pipeline too, and returns the last group's loss: the loss of
// step (n+1+lag)*every of the same run taken with StepMode.
func TestTimedLater(t *testing.T) {
	const n, every, lag = 4, 2, 3
	for _, mode := range []Mode{Lazy, Captured} {
		m := testMLP(t)
		times, loss, err := m.TimedLater(mode, n, every, lag)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(times) != n {
			t.Fatalf("%s: %d times, want %d", mode, len(times), n)
		}
		for i, d := range times {
			if d <= 0 {
				t.Fatalf("%s: time %d is %v", mode, i, d)
			}
		}
		ref := testMLP(t)
		var want float32
		for range LaterGroups(n, lag) * every {
			if want, err = ref.StepMode(mode); err != nil {
				t.Fatal(err)
			}
		}
		if loss != want {
			t.Errorf("%s: TimedLater's last loss %v, the %dth step's %v", mode, loss, LaterGroups(n, lag)*every, want)
		}
	}
	if _, _, err := testMLP(t).TimedLater(Lazy, 1, 1, 0); err == nil {
		t.Error("lag 0 accepted")
	}
}

// BenchmarkStepHost measures the host's share of a training step in each
// mode: the seeds' MLP and Adam at depth 4 but width 8 and batch 4, on the
// cpu device, so the arithmetic is negligible and what remains is core's
// recording, autograd, lowering and program lookup (lazy) or the replay
// (captured). The gap between the two is what a lazy step costs over a
// captured one on any device, a GPU's included.
func BenchmarkStepHost(b *testing.B) {
	for _, mode := range []Mode{Lazy, Captured} {
		b.Run(string(mode), func(b *testing.B) {
			dev, err := core.Open("cpu")
			if err != nil {
				b.Fatal(err)
			}
			defer dev.Close()
			m, err := New(dev, Config{Width: 8, Depth: 4, Batch: 4, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			for range 3 { // compile, record
				if _, err := m.StepMode(mode); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := m.StepMode(mode); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
