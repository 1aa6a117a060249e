package nn_test

import (
	"bytes"
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// fitThree trains w from 0 towards 3 on (w-3)^2 with opt's steps and
// returns w.
func fitThree(w *core.Tensor, opt nn.Optimizer, steps int) float32 {
	for range steps {
		opt.ZeroGrad()
		d := core.AddScalar(w, -3)
		if err := core.Sum(core.Mul(d, d)).Backward(); err != nil {
			panic(err)
		}
		if err := opt.Step(); err != nil {
			panic(err)
		}
	}
	v, err := w.Item()
	if err != nil {
		panic(err)
	}
	return v
}

func openCPU() *core.Device {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	return dev
}

func ExampleNewAdagrad() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	opt := nn.NewAdagrad([]*core.Tensor{w}, 1)
	opt.InitialAccumulator = 0.1 // PyTorch's initial_accumulator_value
	fmt.Printf("%.2f\n", fitThree(w, opt, 200))
	// Output: 3.00
}

func ExampleNewAdamL2() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	// torch.optim.Adam(lr=0.1, weight_decay=0.5): the decay is part of the
	// gradient, so w settles where 2(w-3) + 0.5w = 0, at 2.4.
	opt := nn.NewAdamL2([]*core.Tensor{w}, 0.1, 0.5)
	fmt.Printf("%.2f\n", fitThree(w, opt, 500))
	// Output: 2.40
}

func ExampleNewLion() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	// Every step moves w by the learning rate: 30 steps of 0.1 reach 3.
	opt := nn.NewLion([]*core.Tensor{w}, 0.1)
	fmt.Printf("%.2f\n", fitThree(w, opt, 30))
	// Output: 3.00
}

func ExampleRMSprop() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	opt := nn.NewRMSprop([]*core.Tensor{w}, 0.01)
	opt.Momentum, opt.Centered = 0.9, true // torch.optim.RMSprop(momentum=0.9, centered=True)
	fmt.Printf("%.2f %v\n", fitThree(w, opt, 300), opt.StateSlots())
	// Output: 3.00 [square_avg momentum_buffer grad_avg]
}

func ExampleOneCycle() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	// The optimizer's rate is max_lr; 10 updates, the peak after 3.
	opt := nn.WithSchedule(nn.NewSGD([]*core.Tensor{w}, 0.1, 0.9), nn.OneCycle(10, nn.OneCycleOptions{}))
	for step := 1; step <= 10; step++ {
		fmt.Printf("%.4f ", opt.LR(step))
	}
	fmt.Println()
	// Output: 0.0040 0.0520 0.1000 0.0950 0.0812 0.0611 0.0389 0.0188 0.0050 0.0000
}

func ExampleWithOneCycle() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	// PyTorch's OneCycleLR(max_lr=0.1, total_steps=10) on Adam: the rate
	// as OneCycle, beta1 cycled from 0.95 down to 0.85 and back.
	opt := nn.WithOneCycle(nn.NewAdam([]*core.Tensor{w}, 0.1), 10, nn.OneCycleOptions{})
	for step := 1; step <= 10; step++ {
		h := opt.Hyper(step)
		fmt.Printf("%.3f/%.3f ", h[0], h[1]) // lr/beta1
	}
	fmt.Println()
	// Output: 0.004/0.950 0.052/0.900 0.100/0.850 0.095/0.855 0.081/0.869 0.061/0.889 0.039/0.911 0.019/0.931 0.005/0.945 0.000/0.950
}

func ExampleReduceLROnPlateau() {
	plateau := nn.NewReduceLROnPlateau(0.1)
	plateau.Patience = 1
	// opt := nn.WithSchedule(adam, plateau.Schedule()) follows its rate.
	for _, valLoss := range []float64{1, 0.5, 0.5, 0.5, 0.4, 0.4, 0.4} {
		if _, err := plateau.Step(valLoss); err != nil {
			panic(err)
		}
		fmt.Printf("%g ", plateau.LR())
	}
	fmt.Println()
	// Output: 0.1 0.1 0.1 0.010000000000000002 0.010000000000000002 0.010000000000000002 0.0010000000000000002
}

func ExampleOneCycleMomentum() {
	// The momentum of PyTorch's OneCycleLR over 5 updates, three-phase.
	m := nn.OneCycleMomentum(5, nn.OneCycleOptions{ThreePhase: true, PctStart: 0.4})
	for t := range 5 {
		fmt.Printf("%.3f ", m(t))
	}
	fmt.Println()
	// Output: 0.950 0.850 0.950 0.950 0.950
}

func ExampleWithReduceLROnPlateau() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	plateau := nn.NewReduceLROnPlateau(0.1)
	plateau.Patience = 1
	opt := nn.WithReduceLROnPlateau(nn.NewAdam([]*core.Tensor{w}, 0.1), plateau)
	for _, valLoss := range []float64{1, 0.5, 0.5, 0.5} {
		if _, err := plateau.Step(valLoss); err != nil {
			panic(err)
		}
	}
	// The state file carries the scheduler's state: a fresh one resumes.
	var file bytes.Buffer
	if err := nn.SaveState(&file, nn.Sequential{&nn.Linear{W: w}}, opt); err != nil {
		panic(err)
	}
	resumed := nn.NewReduceLROnPlateau(0.1)
	opt2 := nn.WithReduceLROnPlateau(nn.NewAdam([]*core.Tensor{w}, 0.1), resumed)
	if err := nn.LoadState(&file, nn.Sequential{&nn.Linear{W: w}}, opt2); err != nil {
		panic(err)
	}
	fmt.Printf("%.3g %v\n", resumed.LR(), resumed.ScheduleState()["best"])
	// Output: 0.01 0.5
}

func ExampleCaptureStepAccumulated() {
	dev := openCPU()
	defer dev.Close()
	model := nn.MLP(dev, []int{1, 8, 1}, core.Tanh, nn.NewRNG(1))
	opt := nn.NewAdam(model.Params(), 0.05)
	// Two micro-batches of 2 rows per update: the update of a batch of 4.
	step := nn.CaptureStepAccumulated(opt, 2, func(in []*core.Tensor) *core.Tensor {
		return nn.MSELoss(model.Forward(in[0]), in[1])
	})
	var first, last float32
	for i := range 200 {
		l, err := step.Step(
			core.In([]float32{-1, -0.5}, 2, 1), core.In([]float32{1, 0.25}, 2, 1), // x, y of micro-batch 1
			core.In([]float32{0.5, 1}, 2, 1), core.In([]float32{0.25, 1}, 2, 1), // micro-batch 2
		)
		if err != nil {
			panic(err)
		}
		if i == 0 {
			first = l
		}
		last = l
	}
	fmt.Println(last < first/10, opt.StepCount())
	// Output: true 200
}

func ExampleEMA() {
	dev := openCPU()
	defer dev.Close()
	w := dev.Param([]float32{0}, 1)
	ema := nn.NewEMA([]*core.Tensor{w}, 0.5)
	for _, v := range []float32{4, 2, 8} { // the weights after three steps
		if err := w.WriteAt(0, []float32{v}); err != nil {
			panic(err)
		}
		if err := ema.Update(); err != nil { // 4, then 0.5*4 + 0.5*2 = 3, then 5.5
			panic(err)
		}
	}
	if err := ema.Swap(); err != nil { // evaluate with the average
		panic(err)
	}
	avg, _ := w.Item()
	if err := ema.Swap(); err != nil { // and train on
		panic(err)
	}
	last, _ := w.Item()
	fmt.Println(avg, last)
	// Output: 5.5 8
}
