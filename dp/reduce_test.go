package dp

import (
	"fmt"
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// BenchmarkReduce is the host reduction alone on the 4x1024 MLP (4.2M
// gradients per replica) on two devices of AG_TEST_DEVICE's backend: every replica's gradients read, averaged and
// written back, as Step does between backward and update. Set beside
// BenchmarkStep's step time it is the share of a step the host reduction
// costs on this machine.
func BenchmarkReduce(b *testing.B) {
	sizes := []int{1024, 1024, 1024, 1024, 1024}
	for _, n := range []int{2} { // one replica skips the reduction
		b.Run(fmt.Sprintf("devices=%d", n), func(b *testing.B) {
			var devs []*core.Device
			for range n {
				d, err := core.Open(testenv.Device())
				if err != nil {
					b.Fatal(err)
				}
				defer d.Close()
				devs = append(devs, d)
			}
			tr, err := New(devs, func(dev *core.Device) nn.Sequential { return nn.MLP(dev, sizes, core.ReLU, nn.NewRNG(1)) },
				func(ps []*core.Tensor) nn.Optimizer { return nn.NewSGD(ps, 0.01, 0) },
				func(m nn.Sequential, in []*core.Tensor) *core.Tensor { return nn.MSELoss(m.Forward(in[0]), in[1]) }, Options{})
			if err != nil {
				b.Fatal(err)
			}
			xs := make([]float32, 8*1024)
			x := core.In(xs, 8, 1024)
			if _, err := tr.Step(x, x); err != nil { // the gradients exist
				b.Fatal(err)
			}
			var avg [][]float32
			shards := make([]shard, n)
			for i := range shards {
				shards[i].rows = 1
			}
			for b.Loop() {
				grads := make([][][]float32, n)
				if err := tr.each("reduce", "read", func(i int, r *replica[nn.Sequential]) error {
					grads[i] = make([][]float32, len(r.params))
					for j, p := range r.params {
						v, err := p.Grad().Data()
						grads[i][j] = v
						if err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
				avg, err = average("reduce", grads, shards, n, avg)
				if err != nil {
					b.Fatal(err)
				}
				if err := tr.each("reduce", "write", func(i int, r *replica[nn.Sequential]) error { return r.writeGrads(avg) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
