package core_test

import (
	"fmt"
	"slices"
	"strings"

	_ "github.com/ag-go/ag/backend/cpu"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// A Capture records a step once and replays it: one upload of the inputs,
// one program, one download of the outputs.
func ExampleNewCapture() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	c := core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		return []*core.Tensor{core.AddScalar(core.Scale(in[0], 2), 1)}
	})
	for _, x := range [][]float32{{1, 2}, {10, 20}} {
		out, _ := c.Call(core.In(x, 2))
		fmt.Println(out[0])
	}
	fmt.Println("recordings:", c.Records())
	// Output:
	// [3 5]
	// [21 41]
	// recordings: 1
}

// CallLater asks for a step's outputs and returns without waiting: a loop
// waits for step k's outputs a few steps later, which in the browser keeps
// the GPU busy while they travel back (on the cpu they are read at once).
func ExampleCapture_CallLater() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	c := core.NewCapture(dev, func(in []*core.Tensor) []*core.Tensor {
		return []*core.Tensor{core.Sum(core.Mul(in[0], in[0]))}
	})
	var pending []*core.Later
	for _, x := range [][]float32{{1, 2}, {3, 4}, {5, 6}} {
		l, err := c.CallLater(core.In(x, 2))
		if err != nil {
			panic(err)
		}
		pending = append(pending, l)
	}
	for _, l := range pending {
		v, err := l.Item()
		fmt.Println(v, err)
	}
	// Output:
	// 5 <nil>
	// 25 <nil>
	// 61 <nil>
}

// Checkpoint recomputes a segment in the backward instead of keeping its
// values: the same gradients, less memory (see Device.EstimateMemory).
func ExampleCheckpoint() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	w := dev.Param([]float32{0.5, -1, 2}, 3)
	block := func(x *core.Tensor) *core.Tensor { return core.Tanh(core.Mul(x, w)) }
	x := dev.Tensor([]float32{1, 1, 0.25}, 3)
	loss := core.Sum(core.Checkpoint(block, x))
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	g, _ := w.Grad().Data()
	fmt.Printf("%.4f\n", g)
	// Output: [0.7864 0.4200 0.1966]
}

// Attention with a causal mask: query i attends keys 0..i.
func ExampleAttention() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	q := dev.Tensor([]float32{1, 0, 0, 1, 1, 1}, 3, 2) // 3 positions, width 2
	v := dev.Tensor([]float32{1, 2, 3}, 3, 1)
	y, _ := core.Attention(q, q, v, &core.AttentionOptions{Causal: true}).Data()
	fmt.Printf("%.3f\n", y)
	// Output: [1.000 1.670 2.255]
}

// EstimateMemory plans a recorded step without running it.
func ExampleDevice_EstimateMemory() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	w := dev.Param(make([]float32, 256*256), 256, 256)
	x := dev.Tensor(make([]float32, 64*256), 64, 256)
	e, err := dev.EstimateMemory(func() error {
		return core.Mean(core.Tanh(core.MatMul(core.Tanh(core.MatMul(x, w)), w))).Backward()
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("inputs:", e.Inputs, "bytes (w and x)")
	fmt.Println("the gradient is an output:", e.Outputs >= 256*256*4)
	fmt.Println("nothing ran:", w.Grad() == nil)
	// Output:
	// inputs: 327680 bytes (w and x)
	// the gradient is an output: true
	// nothing ran: true
}

// Under PrecisionF16 a matrix product multiplies the f16 values of its
// operands (and sums in f32): 1 + 2^-12 is 1 in f16.
func ExampleDevice_SetMatMulPrecision() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	a := dev.Tensor([]float32{1 + 1.0/4096}, 1, 1)
	b := dev.Tensor([]float32{1}, 1, 1)
	f32, _ := core.MatMul(a, b).Item()
	prev, err := dev.SetMatMulPrecision(core.PrecisionF16)
	if err != nil {
		panic(err) // a device that cannot round to f16: core.ErrUnsupported
	}
	f16, _ := core.MatMul(a, b).Item()
	dev.SetMatMulPrecision(prev)
	fmt.Println(f32, f16)
	// Output: 1.0002441 1
}

// With its activations stored in f16 between forward and backward, a
// four-layer step plans less memory: each [256, 64] tanh the backward
// reads is held in 32 KiB instead of 64.
func ExampleDevice_SetActivationStorage() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	step := func() error {
		h := dev.Tensor(make([]float32, 256*64), 256, 64)
		for range 4 {
			h = core.Tanh(core.MatMul(h, dev.Param(make([]float32, 64*64), 64, 64)))
		}
		return core.Sum(core.Mul(h, h)).Backward()
	}
	f32, _ := dev.EstimateMemory(step)
	prev, err := dev.SetActivationStorage(core.PrecisionF16)
	if err != nil {
		fmt.Println(err)
		return
	}
	f16, _ := dev.EstimateMemory(step)
	dev.SetActivationStorage(prev)
	fmt.Printf("intermediates: f32 %d KiB, f16 storage %d KiB\n", f32.Intermediates>>10, f16.Intermediates>>10)
	// Output: intermediates: f32 448 KiB, f16 storage 352 KiB
}

// A bf16 table of 1000 rows of 8 values takes 16000 bytes (f32: 32000).
// Rows are rounded when written (1/3 keeps 8 significant bits) and
// gathered as f32 on the device: only the indices cross the bus.
func ExampleHalfTable() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	h, err := dev.NewHalfTable(1000, 8, core.PrecisionBF16)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer h.Release()
	fmt.Println(h, h.Bytes())
	h.WriteRows(42, []float32{1. / 3, 2, 3, 4, 5, 6, 7, 1e30})
	rows, _ := h.Gather(dev.Tensor([]float32{42, 0}, 2)).Data()
	fmt.Println(rows)
	// Output:
	// HalfTable[1000 8] bf16 (device) 16000
	// [0.33398438 2 3 4 5 6 7 1.00025555e+30 0 0 0 0 0 0 0 0]
}

// An optimizer of your own records its update inside UpdatePass: profiles
// show its ops, and the host work between them, as the update.
func ExampleDevice_UpdatePass() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	w := dev.Param([]float32{1, 2}, 2)
	vel, _ := dev.Zeros(2)
	loss := core.Sum(core.Mul(w, w)) // gradient 2w
	if err := loss.Backward(); err != nil {
		panic(err)
	}
	dev.UpdatePass(func() {
		hp := dev.Tensor([]float32{0.1, 0, 0}, 3) // lr 0.1, no momentum or decay
		core.SGDUpdate(w, w.Grad(), vel, hp)
	})
	v, _ := w.Data()
	fmt.Println(v)
	// Output:
	// [0.8 1.6]
}

// Fine-tuning a head: a trained body is frozen (SetRequiresGrad(false))
// and only a new head learns. The backward computes no gradient for the
// body, the optimizer leaves it as it is, and passing every parameter to
// it is fine. (Detach cuts the gradient at a value instead:
// head.Forward(body.Forward(x).Detach()) trains the head alone as well.)
func ExampleTensor_SetRequiresGrad() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	rng := nn.NewRNG(1)
	body := nn.MLP(dev, []int{2, 16, 16}, core.Tanh, rng) // pretend it was trained (LoadSafetensors)
	head := nn.NewLinear(dev, 16, 1, true, rng)
	model := nn.Sequential{body, nn.Func(core.Tanh), head}
	for _, p := range body.Params() {
		p.SetRequiresGrad(false)
	}
	opt := nn.NewAdam(model.Params(), 0.05)
	x := dev.Tensor([]float32{0, 0, 0, 1, 1, 0, 1, 1}, 4, 2)
	y := dev.Tensor([]float32{0, 1, 1, 0}, 4, 1)
	before, err := body[0].Params()[0].Data()
	if err != nil {
		panic(err)
	}
	var first, last float32
	for i := range 200 {
		opt.ZeroGrad()
		loss := nn.MSELoss(model.Forward(x), y)
		if err := loss.Backward(); err != nil {
			panic(err)
		}
		if err := opt.Step(); err != nil {
			panic(err)
		}
		if last, err = loss.Item(); err != nil {
			panic(err)
		}
		if i == 0 {
			first = last
		}
	}
	after, err := body[0].Params()[0].Data()
	if err != nil {
		panic(err)
	}
	fmt.Printf("body unchanged: %t, without gradient: %t; loss fell: %t\n", slices.Equal(before, after), body[0].Params()[0].Grad() == nil, last < first/2)
	// Output: body unchanged: true, without gradient: true; loss fell: true
}

// GraphOf shows a step as the device would run it, without running it:
// each node with what recorded it, its kernel and storage, and where the
// live intermediates peak. WriteDOT gives the same for Graphviz.
func ExampleDevice_GraphOf() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	w := dev.Param([]float32{1, 2, 3, 4, 5, 6}, 3, 2)
	x := dev.Tensor([]float32{1, 0, 1}, 1, 3)
	g, err := dev.GraphOf(func() error {
		return core.Sum(core.Tanh(core.MatMul(x, w))).Backward()
	})
	if err != nil {
		panic(err)
	}
	for _, n := range g.Nodes[:4] {
		fmt.Println(n.Op, n.Shape, n.Recorded, n.Store)
	}
	fmt.Println("peak after a node:", g.PeakNode >= 0, "- nothing ran:", w.Grad() == nil)
	// Output:
	// arg [1 3]  input
	// arg [3 2]  input
	// matmul [1 2] MatMul slot 0
	// tanh [1 2] Tanh slot 1
	// peak after a node: true - nothing ran: true
}

// A memory budget refuses a run that would hold more device memory than
// it allows, before the run allocates anything.
func ExampleDevice_SetMemoryBudget() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	dev.SetMemoryBudget(1 << 20)   // 1 MiB
	big := dev.Full(1, 1024, 1024) // 4 MiB
	_, err := core.Sum(big).Item()
	fmt.Println(err != nil && strings.Contains(err.Error(), "memory budget of 1.0 MiB"))
	dev.SetMemoryBudget(0)
	v, _ := core.Sum(dev.Full(1, 1024, 1024)).Item()
	fmt.Println(v)
	// Output:
	// true
	// 1.048576e+06
}
