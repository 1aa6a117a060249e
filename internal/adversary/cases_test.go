package adversary

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/ag-go/ag/buffer"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

var (
	nan  = float32(math.NaN())
	pinf = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
)

// t23 is a fresh [2, 3] tensor 1..6 on d.
func t23(d *core.Device) *core.Tensor { return d.Tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3) }

// allCases is the suite, in a fixed order (the child processes index it).
func allCases() []adCase {
	var cs []adCase
	for _, g := range [][]adCase{nilCases(), deviceCases(), shapeCases(), rangeCases(), hugeCases(),
		lifecycleCases(), nanCases(), precisionCases(), labelCases(), bufferCases(), nnCases(),
		captureCases(), concurrencyCases(), laterCases()} {
		cs = append(cs, g...)
	}
	return cs
}

// unaryOps are the public ops of one tensor, by name.
var unaryOps = []struct {
	name string
	f    func(x *core.Tensor) *core.Tensor
}{
	{"Neg", core.Neg}, {"Exp", core.Exp}, {"Log", core.Log}, {"Sqrt", core.Sqrt},
	{"ReLU", core.ReLU}, {"Sigmoid", core.Sigmoid}, {"Tanh", core.Tanh},
	{"Scale", func(x *core.Tensor) *core.Tensor { return core.Scale(x, 2) }},
	{"Affine", func(x *core.Tensor) *core.Tensor { return core.Affine(x, 2, 1) }},
	{"Abs", core.Abs}, {"Sign", core.Sign}, {"Sin", core.Sin}, {"Cos", core.Cos},
	{"SiLU", core.SiLU}, {"GELU", core.GELU}, {"GELUErf", core.GELUErf}, {"Softplus", core.Softplus},
	{"Log1p", core.Log1p}, {"Erf", core.Erf},
	{"LeakyReLU", func(x *core.Tensor) *core.Tensor { return core.LeakyReLU(x, 0.1) }},
	{"ELU", func(x *core.Tensor) *core.Tensor { return core.ELU(x, 1) }},
	{"Dropout", func(x *core.Tensor) *core.Tensor { return core.Dropout(x, 0.5) }},
	{"SoftmaxAxis", func(x *core.Tensor) *core.Tensor { return core.SoftmaxAxis(x, 0) }},
	{"Cumsum", func(x *core.Tensor) *core.Tensor { return core.Cumsum(x, 0) }},
	{"Pow", func(x *core.Tensor) *core.Tensor { return core.Pow(x, 3) }},
	{"Clamp", func(x *core.Tensor) *core.Tensor { return core.Clamp(x, -1, 1) }},
	{"Softmax", core.Softmax}, {"LogSoftmax", core.LogSoftmax},
	{"Sum", core.Sum}, {"Mean", core.Mean},
	{"SumAxis", func(x *core.Tensor) *core.Tensor { return core.SumAxis(x, 0, false) }},
	{"MeanAxis", func(x *core.Tensor) *core.Tensor { return core.MeanAxis(x, 0, false) }},
	{"MaxAxis", func(x *core.Tensor) *core.Tensor { return core.MaxAxis(x, 0, false) }},
	{"Reshape", func(x *core.Tensor) *core.Tensor { return core.Reshape(x, -1) }},
	{"Permute", func(x *core.Tensor) *core.Tensor { return core.Permute(x, 1, 0) }},
	{"Transpose", core.Transpose},
	{"Expand", func(x *core.Tensor) *core.Tensor { return core.Expand(x, 2, 2, 3) }},
	{"SliceRows", func(x *core.Tensor) *core.Tensor { return core.SliceRows(x, 0, 1) }},
	{"OneHot", func(x *core.Tensor) *core.Tensor { return core.OneHot(x, 3) }},
	{"RoundF16", core.RoundF16}, {"RoundBF16", core.RoundBF16},
	{"ArgMax", func(x *core.Tensor) *core.Tensor { return core.ArgMax(x, 0, false) }},
	{"MinAxis", func(x *core.Tensor) *core.Tensor { return core.MinAxis(x, 0, false) }},
	{"Checkpoint", func(x *core.Tensor) *core.Tensor { return core.Checkpoint(core.Tanh, x) }},
}

var binaryOps = []struct {
	name string
	f    func(a, b *core.Tensor) *core.Tensor
}{
	{"Add", core.Add}, {"Sub", core.Sub}, {"Mul", core.Mul}, {"Div", core.Div},
	{"Maximum", core.Maximum}, {"Minimum", core.Minimum},
	{"MatMul", func(a, b *core.Tensor) *core.Tensor { return core.MatMulT(a, b, false, true) }},
	{"ConcatRows", core.ConcatRows},
	{"Greater", core.Greater}, {"Equal", core.Equal},
	{"Where", func(a, b *core.Tensor) *core.Tensor { return core.Where(a, a, b) }},
	{"Attention", func(a, b *core.Tensor) *core.Tensor { return core.Attention(a, b, b, nil) }},
	{"Gather", func(a, b *core.Tensor) *core.Tensor {
		if b != nil {
			b = core.Reshape(b, -1) // 1-D indices, so only the device is wrong
		}
		return core.Gather(a, b)
	}},
}

// nilCases: a nil input panics naming the op, never a bare nil dereference.
func nilCases() []adCase {
	var cs []adCase
	for _, op := range unaryOps {
		cs = append(cs, adCase{"nil input to " + op.name, func(e *env) result {
			return panics("core."+op.name, func() { op.f(nil) })
		}})
	}
	for _, op := range binaryOps {
		cs = append(cs, adCase{"nil first input to " + op.name, func(e *env) result {
			return panics("core."+op.name, func() { op.f(nil, t23(e.d)) })
		}}, adCase{"nil second input to " + op.name, func(e *env) result {
			return panics("core."+op.name, func() { op.f(t23(e.d), nil) })
		}})
	}
	cs = append(cs,
		adCase{"nil tensor to Sync", func(e *env) result {
			return panics("core.Device.Sync", func() { _ = e.d.Sync(nil) })
		}},
		adCase{"nil loss to Backward", func(e *env) result {
			return errs((*core.Tensor)(nil).Backward(), "nil")
		}},
		adCase{"nil gradient to AdamWUpdate", func(e *env) result {
			return panics("core.AdamWUpdate", func() { core.AdamWUpdate(e.param, nil, nil, nil, nil) })
		}},
		adCase{"nil device to NewCapture", func(e *env) result {
			return panics("core.NewCapture", func() { core.NewCapture(nil, nil) })
		}},
		adCase{"nil logits to SoftmaxCrossEntropy", func(e *env) result {
			return panics("nn.SoftmaxCrossEntropy", func() { nn.SoftmaxCrossEntropy(nil, e.d.Tensor([]float32{0}, 1)) })
		}},
		adCase{"nil indices to GetRowsOf", func(e *env) result {
			return panics("buffer.GetRowsOf", func() { e.buf.GetRowsOf(nil) })
		}},
	)
	return cs
}

// deviceCases: mixing tensors of two devices panics naming both.
func deviceCases() []adCase {
	var cs []adCase
	for _, op := range binaryOps {
		cs = append(cs, adCase{"two devices in " + op.name, func(e *env) result {
			r := panics("core."+op.name, func() { op.f(t23(e.d), t23(e.other)) })
			if r.out != handled {
				return r
			}
			msg := catch(func() { op.f(t23(e.d), t23(e.other)) })
			if !strings.Contains(msg, "#") {
				return fail(bare, "message %q does not say which device", msg)
			}
			return ok()
		}})
	}
	cs = append(cs,
		adCase{"Sync a tensor of another device", func(e *env) result {
			return errs(e.d.Sync(t23(e.other)), "core: Sync", "#2", "synced on")
		}},
		adCase{"GetRowsOf indices of another device", func(e *env) result {
			return panics("buffer.GetRowsOf", func() { e.buf.GetRowsOf(e.other.Tensor([]float32{0}, 1)) })
		}},
		adCase{"SGDUpdate state of another device", func(e *env) result {
			w := e.d.Param([]float32{1, 2}, 2)
			v, _ := e.other.Zeros(2)
			return panics("core.SGDUpdate", func() { core.SGDUpdate(w, e.d.Tensor([]float32{1, 1}, 2), v, e.d.Tensor([]float32{0.1, 0, 0}, 3)) })
		}},
	)
	return cs
}

// catch returns f's panic message ("" when it returns).
func catch(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// shapeCases: shape mistakes panic naming the op and the shapes.
func shapeCases() []adCase {
	shapePanic := func(name, fn string, f func(d *core.Device)) adCase {
		return adCase{name, func(e *env) result { return panics(fn, func() { f(e.d) }) }}
	}
	x := t23
	return []adCase{
		shapePanic("Add [2 3] + [4]", "core.Add", func(d *core.Device) { core.Add(x(d), d.Tensor([]float32{1, 2, 3, 4}, 4)) }),
		shapePanic("Mul [2 3] * [3 2]", "core.Mul", func(d *core.Device) { core.Mul(x(d), core.Transpose(x(d))) }),
		shapePanic("MatMul inner mismatch", "core.MatMul", func(d *core.Device) { core.MatMul(x(d), x(d)) }),
		shapePanic("MatMul of a scalar", "core.MatMul", func(d *core.Device) { core.MatMul(d.Full(1), x(d)) }),
		shapePanic("MatMul vector of another length", "core.MatMul", func(d *core.Device) { core.MatMul(d.Tensor([]float32{1, 2, 3}, 3), x(d)) }),
		shapePanic("Attention keys of another width", "core.Attention", func(d *core.Device) { core.Attention(x(d), d.Full(1, 2, 4), d.Full(1, 2, 4), nil) }),
		shapePanic("Attention mask of another length", "core.Attention", func(d *core.Device) {
			core.Attention(x(d), x(d), x(d), &core.AttentionOptions{Mask: d.Full(1, 3, 3)})
		}),
		shapePanic("Conv2d of a 3-D input", "nn.Conv2d", func(d *core.Device) {
			nn.NewConv2d(d, 2, 4, [2]int{3, 3}, nn.ConvOptions{}, rand.New(rand.NewPCG(1, 2))).Forward(x(d))
		}),
		shapePanic("Conv2d kernel larger than the input", "nn.Conv2d", func(d *core.Device) {
			nn.NewConv2d(d, 1, 1, [2]int{3, 3}, nn.ConvOptions{}, rand.New(rand.NewPCG(1, 2))).Forward(d.Full(1, 1, 1, 2, 2))
		}),
		shapePanic("BatchNorm2d of other channels", "nn.BatchNorm2d", func(d *core.Device) {
			nn.NewBatchNorm2d(d, 3, 1e-5, 0.1, true).Forward(d.Full(1, 2, 2, 2, 2))
		}),
		shapePanic("MultiHeadAttention of another width", "nn.MultiHeadAttention", func(d *core.Device) {
			nn.NewMultiHeadAttention(d, 4, 2, true, 0, rand.New(rand.NewPCG(1, 2))).Forward(d.Full(1, 1, 2, 3))
		}),
		shapePanic("SetMatMulPrecision unknown", "core.Device.SetMatMulPrecision", func(d *core.Device) { d.SetMatMulPrecision(9) }),
		shapePanic("MatMul batch mismatch", "core.MatMul", func(d *core.Device) {
			core.MatMul(d.Full(1, 2, 2, 3), d.Full(1, 3, 3, 2))
		}),
		shapePanic("Reshape to another size", "core.Reshape", func(d *core.Device) { core.Reshape(x(d), 4, 2) }),
		shapePanic("Reshape with a negative size", "core.Reshape", func(d *core.Device) { core.Reshape(x(d), -2, -3) }),
		shapePanic("Reshape with two -1", "core.Reshape", func(d *core.Device) { core.Reshape(x(d), -1, -1) }),
		shapePanic("Reshape with a zero", "core.Reshape", func(d *core.Device) { core.Reshape(x(d), 0, 6) }),
		shapePanic("Reshape to rank 7", "core.Reshape", func(d *core.Device) { core.Reshape(x(d), 1, 1, 1, 1, 1, 2, 3) }),
		shapePanic("Reshape overflowing", "core.Reshape", func(d *core.Device) { core.Reshape(x(d), 1<<62, 1<<62, 4) }),
		shapePanic("Permute repeated axis", "core.Permute", func(d *core.Device) { core.Permute(x(d), 0, 0) }),
		shapePanic("Permute too few axes", "core.Permute", func(d *core.Device) { core.Permute(x(d), 0) }),
		shapePanic("Permute axis out of range", "core.Permute", func(d *core.Device) { core.Permute(x(d), 0, 7) }),
		shapePanic("Transpose of a vector", "core.Transpose", func(d *core.Device) { core.Transpose(d.Tensor([]float32{1}, 1)) }),
		shapePanic("Expand to a non-broadcast shape", "core.Expand", func(d *core.Device) { core.Expand(x(d), 4, 3, 2) }),
		shapePanic("Expand to rank 7", "core.Expand", func(d *core.Device) { core.Expand(x(d), 1, 1, 1, 1, 1, 2, 3) }),
		shapePanic("Expand to a zero dimension", "core.Expand", func(d *core.Device) { core.Expand(x(d), 0, 2, 3) }),
		shapePanic("ConcatRows of other widths", "core.ConcatRows", func(d *core.Device) { core.ConcatRows(x(d), core.Transpose(x(d))) }),
		shapePanic("ConcatRows of other ranks", "core.ConcatRows", func(d *core.Device) { core.ConcatRows(x(d), d.Tensor([]float32{1}, 1)) }),
		shapePanic("Gather with 2-D indices", "core.Gather", func(d *core.Device) { core.Gather(x(d), x(d)) }),
		shapePanic("OneHot with 0 classes", "core.OneHot", func(d *core.Device) { core.OneHot(d.Tensor([]float32{0}, 1), 0) }),
		shapePanic("OneHot of a matrix", "core.OneHot", func(d *core.Device) { core.OneHot(x(d), 3) }),
		shapePanic("SumAxis axis 5", "core.SumAxis", func(d *core.Device) { core.SumAxis(x(d), 5, false) }),
		shapePanic("SumAxis axis -3", "core.SumAxis", func(d *core.Device) { core.SumAxis(x(d), -3, false) }),
		shapePanic("MaxAxis axis 2", "core.MaxAxis", func(d *core.Device) { core.MaxAxis(x(d), 2, true) }),
		shapePanic("MeanAxis axis MinInt", "core.MeanAxis", func(d *core.Device) { core.MeanAxis(x(d), math.MinInt, true) }),
		shapePanic("Softmax of a scalar", "core.Softmax", func(d *core.Device) { core.Softmax(core.Sum(x(d))) }),
		shapePanic("Clamp lo > hi", "core.Clamp", func(d *core.Device) { core.Clamp(x(d), 2, 1) }),
		shapePanic("Clamp NaN bound", "core.Clamp", func(d *core.Device) { core.Clamp(x(d), nan, 1) }),
		shapePanic("Tensor with too few values", "core.Tensor", func(d *core.Device) { d.Tensor([]float32{1, 2}, 3) }),
		shapePanic("Tensor with a negative dimension", "core.Tensor", func(d *core.Device) { d.Tensor([]float32{}, -1) }),
		shapePanic("Tensor with a zero dimension", "core.Tensor", func(d *core.Device) { d.Tensor([]float32{}, 0, 3) }),
		shapePanic("Tensor of rank 7", "core.Tensor", func(d *core.Device) { d.Tensor([]float32{1}, 1, 1, 1, 1, 1, 1, 1) }),
		shapePanic("Tensor whose size overflows to 0", "core.Tensor", func(d *core.Device) { d.Tensor([]float32{}, 1<<32, 1<<32) }),
		shapePanic("Tensor whose size overflows to 1", "core.Tensor", func(d *core.Device) { d.Tensor([]float32{1}, 1<<32+1, 1<<32-1, 1<<2) }),
		shapePanic("Param with a shape mismatch", "core.Param", func(d *core.Device) { d.Param([]float32{1, 2, 3}, 2, 2) }),
		shapePanic("Full with a huge overflowing shape", "core.Full", func(d *core.Device) { d.Full(1, 1<<40, 1<<40, 1<<40) }),
		shapePanic("Zeros with a negative dimension", "core.Zeros", func(d *core.Device) { d.Zeros(-5) }),
		shapePanic("Dim out of range", "core.Tensor.Dim", func(d *core.Device) { x(d).Dim(7) }),
		shapePanic("AdamWUpdate with 3 hyperparameters", "core.AdamWUpdate", func(d *core.Device) {
			w := d.Param([]float32{1}, 1)
			m, _ := d.Zeros(1)
			v, _ := d.Zeros(1)
			core.AdamWUpdate(w, d.Tensor([]float32{1}, 1), m, v, d.Tensor([]float32{1, 2, 3}, 3))
		}),
		shapePanic("SGDUpdate of a computed tensor", "core.SGDUpdate", func(d *core.Device) {
			w := core.Scale(d.Param([]float32{1}, 1), 2)
			vel, _ := d.Zeros(1)
			core.SGDUpdate(w, d.Tensor([]float32{1}, 1), vel, d.Tensor([]float32{0.1, 0, 0}, 3))
		}),
		shapePanic("MSELoss of other shapes", "nn.MSELoss", func(d *core.Device) { nn.MSELoss(x(d), core.Transpose(x(d))) }),
		shapePanic("SoftmaxCrossEntropy labels of another batch", "nn.SoftmaxCrossEntropy", func(d *core.Device) {
			nn.SoftmaxCrossEntropy(x(d), d.Tensor([]float32{0, 1, 2}, 3))
		}),
		shapePanic("Linear of a wrong width", "nn.Linear", func(d *core.Device) {
			nn.NewLinear(d, 4, 2, true, rand.New(rand.NewPCG(1, 2))).Forward(x(d))
		}),
	}
}

// rangeCases: offsets and counts outside a tensor, overflow included.
func rangeCases() []adCase {
	readAt := func(name string, held bool, off, n int) adCase {
		return adCase{name, func(e *env) result {
			t := e.d.Param([]float32{1, 2, 3}, 3)
			if !held {
				t = core.Scale(t, 1)
				if err := e.d.Sync(t); err != nil {
					return fail(wrong, "%v", err)
				}
			}
			_, err := t.ReadAt(off, n)
			return errs(err, "core: ReadAt", "outside")
		}}
	}
	writeAt := func(name string, off int, vals []float32) adCase {
		return adCase{name, func(e *env) result {
			t := e.d.Param([]float32{1, 2, 3}, 3)
			if err := e.d.Sync(core.Scale(t, 1)); err != nil { // on the device
				return fail(wrong, "%v", err)
			}
			if r := errs(t.WriteAt(off, vals), "core: WriteAt", "outside"); r.out != handled {
				return r
			}
			v, err := t.Data()
			return value(v, err, []float32{1, 2, 3}, 0)
		}}
	}
	slice := func(name string, from, n int) adCase {
		return adCase{name, func(e *env) result {
			return panics("core.SliceRows", func() { core.SliceRows(t23(e.d), from, n) })
		}}
	}
	return []adCase{
		readAt("ReadAt(MaxInt, 2) on the host", true, math.MaxInt, 2),
		readAt("ReadAt(MaxInt, 2) on the device", false, math.MaxInt, 2),
		readAt("ReadAt(2, MaxInt) on the device", false, 2, math.MaxInt),
		readAt("ReadAt(-1, 1)", false, -1, 1),
		readAt("ReadAt(0, -1)", false, 0, -1),
		readAt("ReadAt(MinInt, MinInt)", false, math.MinInt, math.MinInt),
		writeAt("WriteAt(MaxInt, 2 values)", math.MaxInt, []float32{9, 9}),
		writeAt("WriteAt(-1, 1 value)", -1, []float32{9}),
		writeAt("WriteAt(2, 2 values)", 2, []float32{9, 9}),
		writeAt("WriteAt(MaxInt-1, 2 values)", math.MaxInt-1, []float32{9, 9}),
		slice("SliceRows(0, MaxInt)", 0, math.MaxInt),
		slice("SliceRows(MaxInt, 2)", math.MaxInt, 2),
		slice("SliceRows(1, MaxInt) wrapping", 1, math.MaxInt),
		slice("SliceRows(-1, 1)", -1, 1),
		slice("SliceRows(0, 0)", 0, 0),
		slice("SliceRows(2, 1) past the end", 2, 1),
		{"WriteAt on a pending tensor", func(e *env) result {
			return errs(core.Scale(t23(e.d), 1).WriteAt(0, []float32{1}), "WriteAt", "realized")
		}},
	}
}

// hugeCases: inputs too large for any device fail with an error naming the
// size, and leave the device usable.
func hugeCases() []adCase {
	run := func(name string, f func(d *core.Device) *core.Tensor, want ...string) adCase {
		return adCase{name, func(e *env) result {
			_, err := f(e.d).Data()
			return errs(err, want...)
		}}
	}
	return []adCase{
		// The error names the size: 4e12 bytes, or 1e12 elements where the
		// kernels cannot index that many.
		run("Full 1e6 x 1e6", func(d *core.Device) *core.Tensor { return d.Full(1, 1e6, 1e6) }, "core: Data", "000000000000"),
		run("Sum of Full 1e6 x 1e6", func(d *core.Device) *core.Tensor { return core.Sum(d.Full(1, 1e6, 1e6)) }, "core: Data"),
		run("ReLU chain on 1e6 x 1e6", func(d *core.Device) *core.Tensor { return core.Sum(core.Exp(core.ReLU(d.Full(1, 1e6, 1e6)))) }, "core: Data"),
		run("MatMul of 1e5 x 1e5 fills", func(d *core.Device) *core.Tensor {
			return core.Sum(core.MatMul(d.Full(1, 1e5, 1e5), d.Full(1, 1e5, 1e5)))
		}, "core: Data"),
		run("Expand a scalar to 2^40", func(d *core.Device) *core.Tensor { return core.Sum(core.Expand(d.Full(1, 1), 1<<20, 1<<20)) }, "core: Data"),
		run("OneHot with 2^40 classes", func(d *core.Device) *core.Tensor { return core.OneHot(d.Tensor([]float32{0}, 1), 1<<40) }, "core: Data"),
		{"Zeros of 2^44 floats", func(e *env) result {
			_, err := e.d.Zeros(1<<22, 1<<22)
			return errs(err, "core: Zeros")
		}},
		{"buffer of 2^40 records", func(e *env) result {
			_, err := buffer.New(e.d, 1024, 1<<30)
			return errIs(err, buffer.ErrTooLarge, "buffer.New")
		}},
		{"eager op too large", func(e *env) result {
			prev := e.d.SetEager(true)
			defer e.d.SetEager(prev)
			y := e.d.Full(1, 1e6, 1e6)
			_, err := y.Data()
			return errIs(err, core.ErrRunFailed, "core")
		}},
		{"a failed step then training goes on", func(e *env) result {
			w := e.d.Param([]float32{1, 2}, 2)
			bad := core.Add(core.Sum(core.Mul(w, w)), core.Sum(e.d.Full(1, 1e6, 1e6)))
			if err := bad.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			if _, err := bad.Item(); err == nil {
				return fail(wrong, "a 4 TB step ran")
			}
			w.ZeroGrad()
			l := core.Sum(core.Mul(w, w))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			g, err := w.Grad().Data()
			return value(g, err, []float32{2, 4}, 1e-6)
		}},
	}
}

// lifecycleCases: released, spent, failed and closed values.
func lifecycleCases() []adCase {
	return []adCase{
		{"Data of a released tensor", func(e *env) result {
			t := t23(e.d)
			_ = t.Release()
			_, err := t.Data()
			return errIs(err, core.ErrReleased, "core")
		}},
		{"op on a released tensor", func(e *env) result {
			t := t23(e.d)
			_ = t.Release()
			return panics("core.ReLU", func() { core.ReLU(t) })
		}},
		{"Release twice", func(e *env) result {
			t := t23(e.d)
			if err := t.Release(); err != nil {
				return fail(wrong, "%v", err)
			}
			if err := t.Release(); err != nil {
				return fail(wrong, "second Release: %v", err)
			}
			return ok()
		}},
		{"Data of a value not kept", func(e *env) result {
			a := core.ReLU(t23(e.d))
			b := core.Scale(a, 2)
			if _, err := b.Data(); err != nil {
				return fail(wrong, "%v", err)
			}
			_, err := a.Data()
			return errIs(err, core.ErrNotKept, "Keep")
		}},
		{"op on a value not kept", func(e *env) result {
			a := core.ReLU(t23(e.d))
			if _, err := core.Scale(a, 2).Data(); err != nil {
				return fail(wrong, "%v", err)
			}
			return panics("core.Exp", func() { core.Exp(a) })
		}},
		{"Item of a matrix", func(e *env) result {
			_, err := t23(e.d).Item()
			return errs(err, "core: Item", "[2 3]")
		}},
		{"Backward of a matrix", func(e *env) result {
			return errs(core.ReLU(e.d.Param([]float32{1, 2}, 2)).Backward(), "core: Backward", "[2]")
		}},
		{"Backward without parameters", func(e *env) result {
			return errs(core.Sum(t23(e.d)).Backward(), "core: Backward", "requires grad")
		}},
		{"Backward twice", func(e *env) result {
			l := core.Sum(core.Mul(e.d.Param([]float32{1, 2}, 2), e.d.Tensor([]float32{3, 4}, 2)))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			return errs(l.Backward(), "core: Backward", "already")
		}},
		{"Backward of a dropped loss", func(e *env) result {
			w := e.d.Param([]float32{1}, 1)
			l := core.Add(core.Sum(w), core.Sum(e.d.Full(1, 1e6, 1e6)))
			_ = e.d.Sync()
			return errs(l.Backward(), "core: Backward", "failed")
		}},
		{"Close twice, then train", func(e *env) result {
			if err := e.d.Close(); err != nil {
				return fail(wrong, "%v", err)
			}
			if err := e.d.Close(); err != nil {
				return fail(wrong, "second Close: %v", err)
			}
			w := e.d.Param([]float32{3}, 1)
			l := core.Sum(core.Mul(w, w))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			g, err := w.Grad().Data()
			return value(g, err, []float32{6}, 1e-6)
		}},
		{"pending work over Close", func(e *env) result {
			y := core.Scale(t23(e.d), 3)
			if err := e.d.Close(); err != nil {
				return fail(wrong, "%v", err)
			}
			v, err := y.Data()
			return value(v, err, []float32{3, 6, 9, 12, 15, 18}, 1e-6)
		}},
		{"Grad of a data tensor", func(e *env) result {
			if g := t23(e.d).Grad(); g != nil {
				return fail(wrong, "data tensor has gradient %v", g)
			}
			return ok()
		}},
		{"ZeroGrad without a gradient, twice", func(e *env) result {
			w := e.d.Param([]float32{1}, 1)
			w.ZeroGrad()
			w.ZeroGrad()
			return ok()
		}},
		{"WriteAt on a released tensor", func(e *env) result {
			t := e.d.Param([]float32{1, 2}, 2)
			_ = t.Release()
			return errs(t.WriteAt(0, []float32{1}), "core: WriteAt")
		}},
	}
}

// nanCases: IEEE propagation, identical on every backend.
func nanCases() []adCase {
	val := func(name string, f func(d *core.Device) *core.Tensor, want ...float32) adCase {
		return adCase{name, func(e *env) result {
			v, err := f(e.d).Data()
			return value(v, err, want, 1e-5)
		}}
	}
	in := func(d *core.Device, v ...float32) *core.Tensor { return d.Tensor(v, len(v)) }
	return []adCase{
		val("ReLU(NaN, -Inf, +Inf)", func(d *core.Device) *core.Tensor { return core.ReLU(in(d, nan, ninf, pinf)) }, nan, 0, pinf),
		val("Tanh(NaN, +-Inf)", func(d *core.Device) *core.Tensor { return core.Tanh(in(d, nan, ninf, pinf)) }, nan, -1, 1),
		val("Sigmoid(NaN, +-Inf)", func(d *core.Device) *core.Tensor { return core.Sigmoid(in(d, nan, ninf, pinf)) }, nan, 0, 1),
		val("Clamp(NaN)", func(d *core.Device) *core.Tensor { return core.Clamp(in(d, nan, 5, -5), -1, 1) }, nan, 1, -1),
		val("Exp(NaN, -Inf, +Inf)", func(d *core.Device) *core.Tensor { return core.Exp(in(d, nan, ninf, pinf)) }, nan, 0, pinf),
		val("Log(NaN, 0, -1)", func(d *core.Device) *core.Tensor { return core.Log(in(d, nan, 0, -1)) }, nan, ninf, nan),
		val("Sqrt(NaN, -1, +Inf)", func(d *core.Device) *core.Tensor { return core.Sqrt(in(d, nan, -1, pinf)) }, nan, nan, pinf),
		val("Neg(NaN, -Inf)", func(d *core.Device) *core.Tensor { return core.Neg(in(d, nan, ninf)) }, nan, pinf),
		val("Pow(NaN, 0) is 1", func(d *core.Device) *core.Tensor { return core.Pow(in(d, nan, 0, -2), 0) }, 1, 1, 1),
		val("Pow(0, -0.5) is +Inf", func(d *core.Device) *core.Tensor { return core.Pow(in(d, 0, 4), -0.5) }, pinf, 0.5),
		val("Pow(-8, 1/3) is NaN", func(d *core.Device) *core.Tensor { return core.Pow(in(d, -8), 1.0/3) }, nan),
		val("Div by zero", func(d *core.Device) *core.Tensor { return core.Div(in(d, 1, -1, 0), in(d, 0, 0, 0)) }, pinf, ninf, nan),
		val("Inf - Inf", func(d *core.Device) *core.Tensor { return core.Sub(in(d, pinf), in(d, pinf)) }, nan),
		val("Scale(NaN)", func(d *core.Device) *core.Tensor { return core.Scale(in(d, nan, 1), 0) }, nan, 0),
		val("MaxAxis with a NaN", func(d *core.Device) *core.Tensor { return core.MaxAxis(in(d, 1, nan, 3), 0, false) }, nan),
		val("MaxAxis of -Inf", func(d *core.Device) *core.Tensor { return core.MaxAxis(in(d, ninf, ninf), 0, false) }, ninf),
		val("Sum with a NaN", func(d *core.Device) *core.Tensor { return core.Sum(in(d, 1, nan, 3)) }, nan),
		val("Sum with +Inf", func(d *core.Device) *core.Tensor { return core.Sum(in(d, 1, pinf, 3)) }, pinf),
		val("Sum of +Inf and -Inf", func(d *core.Device) *core.Tensor { return core.Sum(in(d, pinf, ninf)) }, nan),
		val("Softmax row with a NaN", func(d *core.Device) *core.Tensor { return core.Softmax(in(d, 1, nan, 2)) }, nan, nan, nan),
		// max-subtraction gives exp(Inf-Inf) = NaN in the sum: the row is NaN
		val("Softmax row with +Inf", func(d *core.Device) *core.Tensor { return core.Softmax(in(d, 1, pinf)) }, nan, nan),
		val("LogSoftmax row with a NaN", func(d *core.Device) *core.Tensor { return core.LogSoftmax(in(d, nan, 0)) }, nan, nan),
		val("Where keeps the unselected Inf and NaN out", func(d *core.Device) *core.Tensor {
			return core.Where(in(d, 1, 0, 1, 0), in(d, 2, pinf, nan, 5), in(d, ninf, 3, 4, nan))
		}, 2, 3, nan, nan),
		val("Greater of huge values and NaN", func(d *core.Device) *core.Tensor {
			return core.Greater(in(d, 3e38, nan, pinf), in(d, -3e38, 1, pinf))
		}, 1, 0, 0),
		val("ArgMax with a NaN is the NaN's index", func(d *core.Device) *core.Tensor { return core.ArgMax(in(d, 1, 5, nan, 9), 0, false) }, 2),
		val("RoundF16 overflows to Inf at 65520", func(d *core.Device) *core.Tensor { return core.RoundF16(in(d, 65504, 65519, 65520, nan)) }, 65504, 65504, pinf, nan),
		val("Attention of a fully masked query is 0", func(d *core.Device) *core.Tensor {
			q := d.Tensor([]float32{1, 2, 3, 4}, 1, 2, 2)
			return core.Attention(q, q, q, &core.AttentionOptions{Mask: d.Tensor([]float32{0, 0}, 1, 1, 2)})
		}, 0, 0, 0, 0),
		val("MatMul with a NaN", func(d *core.Device) *core.Tensor {
			return core.MatMul(d.Tensor([]float32{1, nan}, 1, 2), d.Tensor([]float32{1, 2}, 2, 1))
		}, nan),
		val("MSELoss of a NaN prediction", func(d *core.Device) *core.Tensor {
			return nn.MSELoss(in(d, 1, nan), in(d, 1, 2))
		}, nan),
		{"NaN input gives a NaN loss and a NaN gradient", func(e *env) result {
			w := e.d.Param([]float32{0.5, -0.5, 0.25, 1}, 2, 2)
			x := e.d.Tensor([]float32{nan, 1}, 1, 2)
			loss := core.Mean(core.Tanh(core.ReLU(core.MatMul(x, w))))
			if err := loss.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			l, err := loss.Item()
			if r := value([]float32{l}, err, []float32{nan}, 0); r.out != handled {
				return r
			}
			g, err := w.Grad().Data()
			return value(g[:2], err, []float32{nan, nan}, 0)
		}},
		{"gradient of Pow(x, 0) at 0 is 0", func(e *env) result {
			w := e.d.Param([]float32{0, 2}, 2)
			l := core.Sum(core.Pow(w, 0))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			g, err := w.Grad().Data()
			return value(g, err, []float32{0, 0}, 0)
		}},
		{"gradient of Pow(x, 0.5) at 0 is +Inf", func(e *env) result {
			w := e.d.Param([]float32{0, 4}, 2)
			l := core.Sum(core.Pow(w, 0.5))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			g, err := w.Grad().Data()
			return value(g, err, []float32{pinf, 0.25}, 1e-6)
		}},
	}
}

// precisionCases: long reductions and sizes past the devices' loop and
// dispatch limits give the exact answer.
func precisionCases() []adCase {
	return []adCase{
		{"SumAxis over 1e6 rows", func(e *env) result {
			v, err := core.SumAxis(e.d.Full(1, 1000000, 4), 0, false).Data()
			return value(v, err, []float32{1e6, 1e6, 1e6, 1e6}, 0)
		}},
		{"MeanAxis over 1e6 rows", func(e *env) result {
			v, err := core.MeanAxis(e.d.Full(0.5, 1000000, 3), 0, false).Data()
			return value(v, err, []float32{0.5, 0.5, 0.5}, 1e-6)
		}},
		// A wrong answer here was 5.7% off (cpu's single running sum). The
		// bound is the f32 rounding of the backends' sums: 1e-7 on cpu and
		// webgpu, 1.6e-6 on ggml-vulkan, whose row sums are ggml's own
		// (core/precision_test.go holds cpu to 1e-6).
		{"Sum of 2^25 x 0.1", func(e *env) result {
			v, err := core.Sum(e.d.Full(0.1, 1<<25)).Data()
			return value(v, err, []float32{float32(float64(float32(0.1)) * (1 << 25))}, 4e-6)
		}},
		{"MaxAxis over 1e6 rows", func(e *env) result {
			v, err := core.MaxAxis(e.d.Full(-2, 1000000, 2), 0, false).Data()
			return value(v, err, []float32{-2, -2}, 0)
		}},
		{"bias gradient over 1e6 rows", func(e *env) result {
			b := e.d.Param([]float32{0, 0}, 2)
			l := core.Sum(core.Add(e.d.Full(1, 1000000, 2), b))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			g, err := b.Grad().Data()
			return value(g, err, []float32{1e6, 1e6}, 0)
		}},
		{"Softmax of a row of 1e6", func(e *env) result {
			v, err := core.Sum(core.Softmax(e.d.Full(3, 1, 1000000))).Data()
			return value(v, err, []float32{1}, 1e-5)
		}},
	}
}

// labelCases: class labels out of range are errors, never another class.
func labelCases() []adCase {
	lab := func(name string, labels []float32, want string) adCase {
		return adCase{name, func(e *env) result {
			_, err := core.OneHot(e.d.Tensor(labels, len(labels)), 3).Data()
			return errs(err, want)
		}}
	}
	return []adCase{
		lab("OneHot labels {5, -1}", []float32{5, -1}, "label 5"),
		lab("OneHot label -1", []float32{0, -1}, "label -1"),
		lab("OneHot label 1.5", []float32{1.5}, "label 1.5"),
		lab("OneHot label NaN", []float32{nan}, "label NaN"),
		lab("OneHot label +Inf", []float32{pinf}, "label +Inf"),
		{"SoftmaxCrossEntropy host labels {5, -1}", func(e *env) result {
			_, err := nn.SoftmaxCrossEntropy(t23(e.d), e.d.Tensor([]float32{5, -1}, 2)).Item()
			return errs(err, "label 5")
		}},
		{"SoftmaxCrossEntropy device labels out of range", func(e *env) result {
			v, err := nn.SoftmaxCrossEntropy(t23(e.d), core.AddScalar(e.d.Tensor([]float32{1, 2}, 2), 2)).Item()
			return value([]float32{v}, err, []float32{nan}, 0)
		}},
	}
}

// bufferCases: the buffer API with bad offsets, counts, indices and states.
func bufferCases() []adCase {
	nb := func(e *env) *buffer.Buffer {
		b, err := buffer.New(e.d, 3, 10)
		if err != nil {
			panic(err)
		}
		return b
	}
	return []adCase{
		{"buffer.New width 0", func(e *env) result { _, err := buffer.New(e.d, 0, 5); return errs(err, "buffer.New") }},
		{"buffer.New capacity -1", func(e *env) result { _, err := buffer.New(e.d, 3, -1); return errs(err, "buffer.New") }},
		{"buffer.New nil device", func(e *env) result { _, err := buffer.New(nil, 3, 5); return errs(err, "buffer.New") }},
		{"buffer.New overflowing size", func(e *env) result {
			_, err := buffer.New(e.d, math.MaxInt/2, 4)
			return errs(err, "buffer.New")
		}},
		{"Write at MaxInt", func(e *env) result {
			return errIs(nb(e).Write(math.MaxInt, []float32{1, 2, 3}), buffer.ErrOutOfRange, "buffer.Write")
		}},
		{"Write at -1", func(e *env) result {
			return errIs(nb(e).Write(-1, []float32{1, 2, 3}), buffer.ErrOutOfRange, "buffer.Write")
		}},
		{"Write past the end", func(e *env) result {
			return errIs(nb(e).Write(9, make([]float32, 6)), buffer.ErrOutOfRange, "buffer.Write")
		}},
		{"Write of a partial record", func(e *env) result { return errs(nb(e).Write(0, []float32{1, 2}), "buffer.Write") }},
		{"Read k = MaxInt", func(e *env) result {
			_, err := nb(e).Read(0, math.MaxInt)
			return errIs(err, buffer.ErrOutOfRange, "buffer.Read")
		}},
		{"Read at MaxInt", func(e *env) result {
			_, err := nb(e).Read(math.MaxInt, 1)
			return errIs(err, buffer.ErrOutOfRange, "buffer.Read")
		}},
		{"Read k = -1", func(e *env) result {
			_, err := nb(e).Read(0, -1)
			return errIs(err, buffer.ErrOutOfRange, "buffer.Read")
		}},
		{"GetRows index 10 of 10", func(e *env) result {
			_, err := nb(e).GetRows([]int{10})
			return errIs(err, buffer.ErrOutOfRange, "buffer.GetRows")
		}},
		{"GetRows index -1", func(e *env) result {
			_, err := nb(e).GetRows([]int{-1})
			return errIs(err, buffer.ErrOutOfRange, "buffer.GetRows")
		}},
		{"GetRows index MaxInt", func(e *env) result {
			_, err := nb(e).GetRows([]int{math.MaxInt})
			return errIs(err, buffer.ErrOutOfRange, "buffer.GetRows")
		}},
		{"GetRows empty", func(e *env) result {
			_, err := nb(e).GetRows(nil)
			return errIs(err, buffer.ErrOutOfRange, "buffer.GetRows")
		}},
		{"GetRowsOf clamps device indices", func(e *env) result {
			b := nb(e)
			_ = b.Write(0, []float32{1, 1, 1})
			_ = b.Write(9, []float32{9, 9, 9})
			v, err := b.GetRowsOf(e.d.Tensor([]float32{-5, 99, nan}, 3)).Data()
			return value(v, err, []float32{1, 1, 1, 9, 9, 9, 1, 1, 1}, 0)
		}},
		{"use after Free", func(e *env) result {
			b := nb(e)
			_ = b.Free()
			_, err := b.Read(0, 1)
			return errIs(err, buffer.ErrFreed, "buffer.Read")
		}},
		{"Free twice", func(e *env) result {
			b := nb(e)
			_ = b.Free()
			return errIs(b.Free(), buffer.ErrFreed, "buffer.Free")
		}},
		{"GetRowsOf after Free", func(e *env) result {
			b := nb(e)
			_ = b.Free()
			return panics("buffer.GetRowsOf", func() { b.GetRowsOf(e.d.Tensor([]float32{0}, 1)) })
		}},
		{"Write then Read exact", func(e *env) result {
			b := nb(e)
			if err := b.Write(4, []float32{nan, pinf, -0.0, 1e-45, 3, 4}); err != nil {
				return fail(wrong, "%v", err)
			}
			v, err := b.Read(4, 2)
			return value(v, err, []float32{nan, pinf, 0, 1e-45, 3, 4}, 0)
		}},
		{"buffer survives Close", func(e *env) result {
			b := nb(e)
			_ = b.Write(1, []float32{7, 8, 9})
			if err := e.d.Close(); err != nil {
				return fail(wrong, "%v", err)
			}
			v, err := b.Read(1, 1)
			return value(v, err, []float32{7, 8, 9}, 0)
		}},
		{"concurrent Write and Free", func(e *env) result {
			b := nb(e)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); _ = b.Write(0, []float32{1, 2, 3}) }()
			go func() { defer wg.Done(); _ = b.Free() }()
			wg.Wait()
			_, err := b.Read(0, 1)
			return errIs(err, buffer.ErrFreed, "buffer.Read")
		}},
		// 16-bit storage: the same checks, and the values rounded once.
		{"NewWithStorage unknown storage", func(e *env) result {
			_, err := buffer.NewWithStorage(e.d, 3, 10, core.Precision(9))
			return errs(err, "buffer.NewWithStorage", "storage precision 9")
		}},
		{"NewWithStorage bf16 refused or exact", func(e *env) result {
			b, err := buffer.NewWithStorage(e.d, 3, 10, core.PrecisionBF16)
			if err != nil {
				return errIs(err, core.ErrUnsupported, "buffer.NewWithStorage", "bf16")
			}
			defer b.Free()
			_ = b.Write(2, []float32{nan, pinf, 1.00390625}) // the last rounds to 1 (ties to even)
			v, err := b.GetRowsOf(e.d.Tensor([]float32{2, -4}, 2)).Data()
			return value(v, err, []float32{nan, pinf, 1, 0, 0, 0}, 0)
		}},
		{"f16 Write rounds, Read and GetRowsOf agree", func(e *env) result {
			b, err := buffer.NewWithStorage(e.d, 3, 10, core.PrecisionF16)
			if err != nil {
				return fail(wrong, "%v", err)
			}
			defer b.Free()
			if err := b.Write(8, []float32{nan, 7e4, -0.1, 1e-45, 65519, 3}); err != nil {
				return fail(wrong, "%v", err)
			}
			want := []float32{nan, pinf, -0.099975586, 0, 65504, 3}
			v, err := b.Read(8, 2)
			if r := value(v, err, want, 0); r.out != handled {
				return r
			}
			v, err = b.GetRowsOf(e.d.Tensor([]float32{8, 99}, 2)).Data()
			return value(v, err, want, 0)
		}},
		{"f16 GetRows index 10 of 10", func(e *env) result {
			b, err := buffer.NewWithStorage(e.d, 3, 10, core.PrecisionF16)
			if err != nil {
				return fail(wrong, "%v", err)
			}
			defer b.Free()
			_, err = b.GetRows([]int{3, 10})
			return errIs(err, buffer.ErrOutOfRange, "buffer.GetRows")
		}},
		{"f16 use after Free", func(e *env) result {
			b, err := buffer.NewWithStorage(e.d, 3, 10, core.PrecisionF16)
			if err != nil {
				return fail(wrong, "%v", err)
			}
			_ = b.Free()
			if r := panics("buffer.GetRowsOf", func() { b.GetRowsOf(e.d.Tensor([]float32{0}, 1)) }); r.out != handled {
				return r
			}
			return errIs(b.Write(0, []float32{1, 2, 3}), buffer.ErrFreed, "buffer.Write")
		}},
		{"HalfTable.Gather of 2-D indices", func(e *env) result {
			h, err := e.d.NewHalfTable(4, 3, core.PrecisionF16)
			if err != nil {
				return fail(wrong, "%v", err)
			}
			defer h.Release()
			return panics("core.HalfTable.Gather", func() { h.Gather(t23(e.d)) })
		}},
		{"HalfTable.WriteRows past the end", func(e *env) result {
			h, err := e.d.NewHalfTable(4, 3, core.PrecisionF16)
			if err != nil {
				return fail(wrong, "%v", err)
			}
			defer h.Release()
			return errs(h.WriteRows(3, make([]float32, 6)), "core.HalfTable.WriteRows", "rows 3..4")
		}},
	}
}

// nnCases: state files, optimizers and layers with bad input.
func nnCases() []adCase {
	model := func(d *core.Device) (nn.Sequential, *nn.Adam) {
		m := nn.MLP(d, []int{2, 3, 1}, core.Tanh, rand.New(rand.NewPCG(3, 4)))
		return m, nn.NewAdam(m.Params(), 0.01)
	}
	saved := func(d *core.Device) []byte {
		m, o := model(d)
		var b bytes.Buffer
		if err := nn.SaveState(&b, m, o); err != nil {
			panic(err)
		}
		return b.Bytes()
	}
	load := func(name string, edit func(b []byte) []byte) adCase {
		return adCase{name, func(e *env) result {
			m, o := model(e.d)
			before, _ := m.Params()[0].Data()
			err := nn.LoadState(bytes.NewReader(edit(saved(e.d))), m, o)
			if r := errIs(err, nn.ErrStateMismatch, "nn"); r.out != handled {
				return r
			}
			after, err := m.Params()[0].Data()
			if r := value(after, err, before, 0); r.out != handled {
				return fail(lost, "a refused LoadState changed the model: %s", r.detail)
			}
			if o.LR != 0.01 {
				return fail(lost, "a refused LoadState changed LR to %g", o.LR)
			}
			return ok()
		}}
	}
	replace := func(old, new string) func([]byte) []byte {
		return func(b []byte) []byte { return bytes.Replace(b, []byte(old), []byte(new), 1) }
	}
	return []adCase{
		load("LoadState truncated header", func(b []byte) []byte { return b[:20] }),
		load("LoadState truncated data", func(b []byte) []byte { return b[:len(b)-3] }),
		load("LoadState trailing bytes", func(b []byte) []byte { return append(b, 1, 2, 3, 4) }),
		load("LoadState empty file", func(b []byte) []byte { return nil }),
		load("LoadState bad magic", func(b []byte) []byte { c := bytes.Clone(b); c[0] = 'X'; return c }),
		load("LoadState huge header length", func(b []byte) []byte {
			c := bytes.Clone(b)
			c[8], c[9], c[10], c[11] = 0xff, 0xff, 0xff, 0x7f
			return c
		}),
		load("LoadState hyper {}", func(b []byte) []byte {
			i, j := bytes.Index(b, []byte(`"hyper":{`)), bytes.Index(b, []byte(`}}`))
			if i < 0 || j < 0 {
				return nil
			}
			return append(append(bytes.Clone(b[:i]), []byte(`"hyper":{`)...), b[j:]...)
		}),
		load("LoadState step -5", func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"step":`))
			j := i + bytes.IndexAny(b[i:], ",}")
			return append(append(bytes.Clone(b[:i]), []byte(`"step":-5`)...), b[j:]...)
		}),
		load("LoadState other shape", replace(`"shape":[2,3]`, `"shape":[3,2]`)),
		load("LoadState other optimizer", replace(`"kind":"adam"`, `"kind":"sgd"`)),
		{"SaveState to a failing writer", func(e *env) result {
			m, o := model(e.d)
			return errs(nn.SaveState(failWriter{}, m, o), "disk full")
		}},
		{"optimizer without parameters", func(e *env) result {
			return errs(nn.NewSGD(nil, 0.1, 0).Step(), "nn")
		}},
		{"Adam with a NaN learning rate", func(e *env) result {
			m, o := model(e.d)
			o.LR = nan
			l := core.Sum(m.Forward(e.d.Tensor([]float32{1, 2}, 1, 2)))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			return errs(o.Step(), "nn.Adam.Step", "lr")
		}},
		{"SGD with a negative learning rate", func(e *env) result {
			m, _ := model(e.d)
			o := nn.NewSGD(m.Params(), -1, 0)
			l := core.Sum(m.Forward(e.d.Tensor([]float32{1, 2}, 1, 2)))
			if err := l.Backward(); err != nil {
				return fail(wrong, "%v", err)
			}
			return errs(o.Step(), "nn.SGD.Step", "lr")
		}},
		{"MLP with a zero width", func(e *env) result {
			return panics("nn.", func() { nn.MLP(e.d, []int{2, 0, 1}, core.Tanh, rand.New(rand.NewPCG(1, 1))) })
		}},
		{"NewLinear with a negative width", func(e *env) result {
			return panics("nn.NewLinear", func() { nn.NewLinear(e.d, -1, 2, true, rand.New(rand.NewPCG(1, 1))) })
		}},
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// captureCases: misuse of Capture.
func captureCases() []adCase {
	return []adCase{
		{"Capture.Call without inputs", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor { return in })
			_, err := c.Call()
			return errs(err, "core: Capture.Call", "no inputs")
		}},
		{"Capture.Call data/shape mismatch", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor { return in })
			_, err := c.Call(core.In([]float32{1, 2, 3}, 2, 2))
			return errs(err, "core: Capture.Call", "3 values")
		}},
		{"Capture.Call bad shape", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor { return in })
			return panics("core.Capture.Call", func() { _, _ = c.Call(core.In([]float32{}, 0)) })
		}},
		{"captured function returns nothing", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor { return nil })
			_, err := c.Call(core.In([]float32{1}, 1))
			return errs(err, "core: Capture", "no outputs")
		}},
		{"captured function panics", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor { panic("boom") })
			_, err := c.Call(core.In([]float32{1}, 1))
			return errs(err, "core: Capture", "boom")
		}},
		{"captured function syncs", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor {
				if _, err := in[0].Data(); err != nil {
					panic(err)
				}
				return in
			})
			_, err := c.Call(core.In([]float32{1}, 1))
			return errIs(err, core.ErrCapture, "core")
		}},
		{"captured function uploads", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor {
				return []*core.Tensor{core.Add(in[0], e.d.Tensor([]float32{1}, 1))}
			})
			_, err := c.Call(core.In([]float32{1}, 1))
			return errIs(err, core.ErrCapture, "core")
		}},
		{"captured step replays after Close", func(e *env) result {
			w := e.d.Param([]float32{2}, 1)
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor { return []*core.Tensor{core.Mul(in[0], w)} })
			if _, err := c.Call(core.In([]float32{1}, 1)); err != nil {
				return fail(wrong, "%v", err)
			}
			if err := e.d.Close(); err != nil {
				return fail(wrong, "%v", err)
			}
			out, err := c.Call(core.In([]float32{5}, 1))
			if err != nil {
				return fail(wrong, "%v", err)
			}
			return value(out[0], nil, []float32{10}, 0)
		}},
	}
}

// concurrencyCases: one device from several goroutines.
func concurrencyCases() []adCase {
	return []adCase{
		{"four goroutines train their own parameter", func(e *env) result {
			var wg sync.WaitGroup
			res := make([]result, 4)
			for k := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					w := e.d.Param([]float32{float32(k), 1}, 2)
					for step := 0; step < 5; step++ {
						w.ZeroGrad()
						l := core.Sum(core.Mul(w, w))
						if err := l.Backward(); err != nil {
							res[k] = fail(wrong, "%v", err)
							return
						}
						g, err := w.Grad().Data()
						if err != nil {
							res[k] = fail(wrong, "%v", err)
							return
						}
						cur, _ := w.Data()
						for i := range cur {
							cur[i] -= 0.1 * g[i]
						}
						_ = w.WriteAt(0, cur)
					}
					v, err := w.Data()
					f := float32(math.Pow(0.8, 5))
					res[k] = value(v, err, []float32{float32(k) * f, f}, 1e-5)
				}()
			}
			wg.Wait()
			for _, r := range res {
				if r.out != handled {
					return r
				}
			}
			return ok()
		}},
		{"NoGrad in one goroutine, Backward in another", func(e *env) result {
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
						e.d.NoGrad(func() { _, _ = core.ReLU(t23(e.d)).Data() })
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			for i := 0; i < 20; i++ {
				w := e.d.Param([]float32{1, 2}, 2)
				l := core.Sum(core.Mul(w, w))
				if err := l.Backward(); err != nil {
					return fail(wrong, "step %d: %v", i, err)
				}
				g, err := w.Grad().Data()
				if r := value(g, err, []float32{2, 4}, 0); r.out != handled {
					return r
				}
			}
			return ok()
		}},
		{"Close while another goroutine computes", func(e *env) result {
			var wg sync.WaitGroup
			wg.Add(1)
			var v []float32
			var err error
			go func() {
				defer wg.Done()
				v, err = core.Scale(t23(e.d), 2).Data()
			}()
			cerr := e.d.Close()
			wg.Wait()
			if cerr != nil {
				return fail(wrong, "Close: %v", cerr)
			}
			return value(v, err, []float32{2, 4, 6, 8, 10, 12}, 0)
		}},
	}
}

// laterCases: reads asked for and waited for later (core.Later) keep the
// values of when they were asked, on bad input name the function, and
// survive the device closing and other goroutines.
func laterCases() []adCase {
	sq := func(e *env) *core.Tensor { return core.Mul(t23(e.d), t23(e.d)) }
	want := []float32{1, 4, 9, 16, 25, 36}
	return []adCase{
		{"ReadLater of a released tensor", func(e *env) result {
			t := t23(e.d)
			_ = t.Release()
			_, err := t.ReadLater()
			return errIs(err, core.ErrReleased, "core", "ReadLater")
		}},
		{"ReadLater, then the tensor released and its memory reused, then Wait", func(e *env) result {
			t := sq(e)
			l, err := t.ReadLater()
			if err != nil {
				return fail(wrong, "%v", err)
			}
			_ = t.Release()
			if _, err := core.Scale(sq(e), -1).Data(); err != nil { // takes the pool's buffers
				return fail(wrong, "%v", err)
			}
			out, err := l.Wait()
			if err != nil || len(out) != 1 {
				return fail(wrong, "%v %v", out, err)
			}
			return value(out[0], nil, want, 0)
		}},
		{"ReadLater of NaN and infinities", func(e *env) result {
			inf := float32(math.Inf(1))
			l, err := core.Scale(e.d.Tensor([]float32{float32(math.NaN()), inf, -inf, 1}, 4), 2).ReadLater()
			if err != nil {
				return fail(wrong, "%v", err)
			}
			out, err := l.Wait()
			if err != nil || len(out) != 1 || len(out[0]) != 4 || !math.IsNaN(float64(out[0][0])) ||
				out[0][1] != inf || out[0][2] != -inf || out[0][3] != 2 {
				return fail(wrong, "%v %v, want [NaN +Inf -Inf 2]", out, err)
			}
			return ok()
		}},
		{"Later.Item of a read of six values", func(e *env) result {
			l, err := sq(e).ReadLater()
			if err != nil {
				return fail(wrong, "%v", err)
			}
			_, err = l.Item()
			return errs(err, "core", "Later.Item", "6 elements")
		}},
		{"Wait after the device closed", func(e *env) result {
			d, err := core.Open(e.name)
			if err != nil {
				return fail(wrong, "%v", err)
			}
			l, err := core.Mul(t23(d), t23(d)).ReadLater()
			if err != nil {
				d.Close()
				return fail(wrong, "%v", err)
			}
			if err := d.Close(); err != nil {
				return fail(wrong, "Close: %v", err)
			}
			// natively the values were read when asked for; in the browser
			// the read fails, saying the backend closed
			out, err := l.Wait()
			if err != nil {
				return errs(err, "closed")
			}
			return value(out[0], nil, want, 0)
		}},
		{"CallLater waited for in other goroutines while steps go on", func(e *env) result {
			c := core.NewCapture(e.d, func(in []*core.Tensor) []*core.Tensor {
				return []*core.Tensor{core.Sum(core.Mul(in[0], in[0]))}
			})
			ls := make([]*core.Later, 20)
			for i := range ls {
				l, err := c.CallLater(core.In([]float32{float32(i), 1}, 2))
				if err != nil {
					return fail(wrong, "call %d: %v", i, err)
				}
				ls[i] = l
			}
			var wg sync.WaitGroup
			res := make([]result, len(ls))
			for i, l := range ls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					v, err := l.Item()
					res[i] = value([]float32{v}, err, []float32{float32(i*i + 1)}, 0)
				}()
			}
			for i := range 5 { // more work while they wait
				if _, err := c.Call(core.In([]float32{float32(i), 2}, 2)); err != nil {
					return fail(wrong, "%v", err)
				}
			}
			wg.Wait()
			for _, r := range res {
				if r.out != handled {
					return r
				}
			}
			return ok()
		}},
	}
}
