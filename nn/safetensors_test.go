package nn

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/safetensors"
)

func names(ns []Named) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

// convBNNet is a conv + batchnorm network in a struct of its own, with a
// nested Sequential, a skipped unexported field and a map of heads.
type convBNNet struct {
	Body  Sequential
	Heads map[string]*Linear
	tmp   *core.Tensor
}

func (n *convBNNet) Forward(x *core.Tensor) *core.Tensor {
	return n.Heads["b"].Forward(n.Body.Forward(x))
}
func (n *convBNNet) Params() []*core.Tensor {
	return append(n.Body.Params(), append(n.Heads["b"].Params(), n.Heads["a"].Params()...)...)
}
func (n *convBNNet) Buffers() []*core.Tensor { return n.Body.Buffers() }

func TestNamedParams(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(1, 1))
	mlp := MLP(dev, []int{3, 4, 2}, core.ReLU, r)
	ps, err := NamedParams(mlp)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(ps), []string{"0.W", "0.B", "2.W", "2.B"}; !slices.Equal(got, want) {
		t.Errorf("MLP: %q, want %q", got, want)
	}
	for i, p := range mlp.Params() {
		if ps[i].Tensor != p {
			t.Errorf("MLP: name %d is not Params()[%d]", i, i)
		}
	}

	net := &convBNNet{
		Body: Sequential{NewConv2d(dev, 1, 2, [2]int{3, 3}, ConvOptions{Padding: 1}, r), NewBatchNorm2d(dev, 2, 1e-5, 0.1, true),
			Func(core.ReLU), Checkpointed{NewLinear(dev, 2, 2, false, r)}, Flatten{}},
		Heads: map[string]*Linear{"b": NewLinear(dev, 2, 3, true, r), "a": NewLinear(dev, 2, 1, true, r)},
		tmp:   dev.Tensor([]float32{1}, 1),
	}
	st, err := NamedState(net)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Body.0.W", "Body.0.B", "Body.1.Gain", "Body.1.Bias", "Body.3.W", "Heads.b.W", "Heads.b.B", "Heads.a.W", "Heads.a.B",
		"Body.1.RunningMean", "Body.1.RunningVar"}
	if got := names(st); !slices.Equal(got, want) {
		t.Errorf("conv net: %q,\nwant %q", got, want)
	}
	bs, err := NamedBuffers(net)
	if err != nil || !slices.Equal(names(bs), want[9:]) {
		t.Errorf("NamedBuffers: %q, %v", names(bs), err)
	}
}

// tied shares one Linear twice, and lists a tensor no field reaches when
// hidden is set.
type tied struct {
	A, B   *Linear
	hidden *core.Tensor
}

func (m *tied) Forward(x *core.Tensor) *core.Tensor { return m.B.Forward(m.A.Forward(x)) }
func (m *tied) Params() []*core.Tensor {
	ps := append(m.A.Params(), m.B.Params()...)
	if m.hidden != nil {
		ps = append(ps, m.hidden)
	}
	return ps
}

// renamed names its tensors itself (Namer).
type renamed struct{ L *Linear }

func (m renamed) Forward(x *core.Tensor) *core.Tensor { return m.L.Forward(x) }
func (m renamed) Params() []*core.Tensor              { return m.L.Params() }
func (m renamed) NamedTensors() []Named {
	return []Named{{"proj.weight", m.L.W}, {"proj.bias", m.L.B}}
}

// clash gives two parameters one name.
type clash struct{ renamed }

func (m clash) NamedTensors() []Named { return []Named{{"x", m.L.W}, {"x", m.L.B}} }

func TestNamedParamsRules(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(2, 1))
	l := NewLinear(dev, 2, 2, true, r)
	ps, err := NamedParams(&tied{A: l, B: l})
	if err != nil || !slices.Equal(names(ps), []string{"A.W", "A.B"}) {
		t.Errorf("tied: %q, %v; want the first names, once", names(ps), err)
	}
	_, err = NamedParams(&tied{A: l, B: l, hidden: dev.Param([]float32{1, 2, 3}, 3)})
	if err == nil || !strings.Contains(err.Error(), "nn.NamedParams: parameter 4 of *nn.tied (shape [3]) is in no exported field") {
		t.Errorf("unreachable parameter: %v", err)
	}
	ps, err = NamedParams(Sequential{NewLinear(dev, 2, 2, true, r), renamed{l}})
	if err != nil || !slices.Equal(names(ps), []string{"0.W", "0.B", "1.proj.weight", "1.proj.bias"}) {
		t.Errorf("Namer: %q, %v", names(ps), err)
	}
	_, err = NamedParams(clash{renamed{l}})
	if err == nil || !strings.Contains(err.Error(), `two tensors of nn.clash are named "x" (shapes [2 2] and [2])`) {
		t.Errorf("clash: %v", err)
	}
}

func modelData(t *testing.T, m Module) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, p := range append(m.Params(), Buffers(m)...) {
		v, err := p.Data()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func sameData(a, b [][]float32) bool {
	return slices.EqualFunc(a, b, func(x, y []float32) bool {
		return slices.EqualFunc(x, y, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) })
	})
}

func newBNNet(dev *core.Device, seed uint64) Sequential {
	r := rand.New(rand.NewPCG(seed, 3))
	s := Sequential{NewConv2d(dev, 2, 3, [2]int{3, 3}, ConvOptions{Padding: 1}, r), NewBatchNorm2d(dev, 3, 1e-5, 0.1, true),
		Func(core.ReLU), Flatten{}, NewLinear(dev, 3*4*4, 5, true, r)}
	// running statistics that differ from a fresh model's
	s[1].(*BatchNorm).RunningMean.WriteAt(0, []float32{0.1, -0.2, 0.3})
	s[1].(*BatchNorm).RunningVar.WriteAt(0, []float32{1.5, 0.5, 2})
	return s
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dev := openDev(t)
	a, b := newBNNet(dev, 1), newBNNet(dev, 2)
	var buf bytes.Buffer
	if err := SaveSafetensors(&buf, a, SaveOptions{Metadata: map[string]string{"run": "7"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := LoadSafetensors(bytes.NewReader(buf.Bytes()), b, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing)+len(rep.Unexpected) != 0 || rep.Metadata["run"] != "7" {
		t.Errorf("report %+v", rep)
	}
	if !sameData(modelData(t, a), modelData(t, b)) {
		t.Error("loaded model's values differ from the saved one's")
	}
	// The file is standard: keys are NamedState's names, F32.
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	st, _ := NamedState(a)
	var keys []string
	for _, t := range f.Tensors {
		keys = append(keys, t.Name)
	}
	if !slices.Equal(keys, names(st)) {
		t.Errorf("keys %q, want %q", keys, names(st))
	}
}

func TestSafetensorsHalf(t *testing.T) {
	dev := openDev(t)
	a := newBNNet(dev, 1)
	want := modelData(t, a)
	for _, c := range []struct {
		dt    safetensors.DType
		round func(float32) float32
		tol   float64 // relative error of the rounding, half a unit in the last place
	}{{safetensors.F16, backend.RoundF16, 1.0 / 2048}, {safetensors.BF16, backend.RoundBF16, 1.0 / 256}} {
		var buf bytes.Buffer
		if err := SaveSafetensors(&buf, a, SaveOptions{DType: c.dt}); err != nil {
			t.Fatal(err)
		}
		b := newBNNet(dev, 2)
		if _, err := LoadSafetensors(&buf, b, LoadOptions{}); err != nil {
			t.Fatal(err)
		}
		got := modelData(t, b)
		changed := 0
		for i := range want {
			for j, x := range want[i] {
				if r := c.round(x); got[i][j] != r {
					t.Fatalf("%s: tensor %d value %d: %g loaded as %g, want %g", c.dt, i, j, x, got[i][j], r)
				}
				if math.Abs(float64(got[i][j]-x)) > c.tol*math.Abs(float64(x)) {
					t.Fatalf("%s: %g loaded as %g: more than the relative %g", c.dt, x, got[i][j], c.tol)
				}
				if got[i][j] != x {
					changed++
				}
			}
		}
		if changed == 0 {
			t.Errorf("%s: no value changed: not rounded?", c.dt)
		}
	}
}

func TestSafetensorsStrict(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(5, 5))
	small := MLP(dev, []int{3, 4, 2}, core.ReLU, r) // 0.W 0.B 2.W 2.B
	var buf bytes.Buffer
	if err := SaveSafetensors(&buf, small, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	// A model with one more layer: 4.W, 4.B missing; a renamed one: every key different.
	big := MLP(dev, []int{3, 4, 2, 2}, core.ReLU, r)
	before := modelData(t, big)
	rep, err := LoadSafetensors(bytes.NewReader(buf.Bytes()), big, LoadOptions{})
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `2 missing keys ["4.W" "4.B"], 0 unexpected keys [] (LoadOptions.NonStrict loads the keys that match)`) {
		t.Errorf("strict: %v", err)
	}
	if !slices.Equal(rep.Missing, []string{"4.W", "4.B"}) || rep.Unexpected != nil {
		t.Errorf("strict report %+v", rep)
	}
	if !sameData(before, modelData(t, big)) {
		t.Error("a refused strict load changed the model")
	}
	rep, err = LoadSafetensors(bytes.NewReader(buf.Bytes()), big, LoadOptions{NonStrict: true})
	if err != nil || !slices.Equal(rep.Missing, []string{"4.W", "4.B"}) {
		t.Fatalf("non-strict: %+v, %v", rep, err)
	}
	after := modelData(t, big)
	if !sameData(after[:4], modelData(t, small)) || !sameData(after[4:], before[4:]) {
		t.Error("non-strict: the file's tensors not loaded, or the missing ones changed")
	}
	// Unexpected: the small model loads from the big one's file.
	buf.Reset()
	SaveSafetensors(&buf, big, SaveOptions{})
	rep, err = LoadSafetensors(bytes.NewReader(buf.Bytes()), small, LoadOptions{NonStrict: true})
	if err != nil || rep.Missing != nil || !slices.Equal(rep.Unexpected, []string{"4.W", "4.B"}) {
		t.Errorf("unexpected: %+v, %v", rep, err)
	}
	_, err = LoadSafetensors(bytes.NewReader(buf.Bytes()), small, LoadOptions{})
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `0 missing keys [], 2 unexpected keys ["4.W" "4.B"]`) {
		t.Errorf("strict unexpected: %v", err)
	}
	// A shape mismatch is an error strict or not.
	other := MLP(dev, []int{3, 5, 2}, core.ReLU, r)
	before = modelData(t, other)
	_, err = LoadSafetensors(bytes.NewReader(buf.Bytes()), other, LoadOptions{NonStrict: true})
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `nn.LoadSafetensors: tensor "0.W" has shape [3 4], the model's is [3 5]`) {
		t.Errorf("shape: %v", err)
	}
	if !sameData(before, modelData(t, other)) {
		t.Error("a refused load changed the model")
	}
}

// TestSafetensorsCorrupt damages a good file in every header and data
// position class and checks each is refused with the model unchanged.
func TestSafetensorsCorrupt(t *testing.T) {
	dev := openDev(t)
	a := newBNNet(dev, 1)
	var buf bytes.Buffer
	if err := SaveSafetensors(&buf, a, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	hlen := int(binary.LittleEndian.Uint64(good))
	damage := map[string]func([]byte) []byte{
		"cut in the data":   func(b []byte) []byte { return b[:len(b)-3] },
		"cut in the header": func(b []byte) []byte { return b[:hlen/2] },
		"byte after":        func(b []byte) []byte { return append(b, 0) },
		"length":            func(b []byte) []byte { binary.LittleEndian.PutUint64(b, uint64(hlen+8)); return b },
		"dtype":             func(b []byte) []byte { return bytes.Replace(b, []byte(`"F32"`), []byte(`"U32"`), 1) },
		"offset": func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"data_offsets":[0,`), []byte(`"data_offsets":[4,`), 1)
		},
		"json": func(b []byte) []byte { b[8+hlen/2] = '}'; return b },
	}
	for name, d := range damage {
		b := newBNNet(dev, 2)
		before := modelData(t, b)
		_, err := LoadSafetensors(bytes.NewReader(d(slices.Clone(good))), b, LoadOptions{})
		if !errors.Is(err, ErrStateCorrupt) || !errors.Is(err, ErrStateMismatch) || !errors.Is(err, safetensors.ErrInvalid) {
			t.Errorf("%s: %v, want ErrStateCorrupt", name, err)
		}
		if !sameData(before, modelData(t, b)) {
			t.Errorf("%s: the refused load changed the model", name)
		}
	}
}

func TestSafetensorsKeyMap(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(3, 3))
	a := MLP(dev, []int{2, 3}, nil, r)
	km := KeyMap{Rename: func(n string) string { return "model." + n }, Transposed: []string{"0.W"}}
	var buf bytes.Buffer
	if err := SaveSafetensors(&buf, a, SaveOptions{Keys: km}); err != nil {
		t.Fatal(err)
	}
	f, _ := safetensors.Read(bytes.NewReader(buf.Bytes()))
	w, _ := f.Tensor("model.0.W")
	aw, _ := a[0].(*Linear).W.Data()
	if !slices.Equal(w.Shape, []int{3, 2}) || !slices.Equal(w.Data, transpose2(aw, 2, 3)) {
		t.Errorf("transposed W written as %v %v, W is %v", w.Shape, w.Data, aw)
	}
	b := MLP(dev, []int{2, 3}, nil, rand.New(rand.NewPCG(4, 4)))
	if _, err := LoadSafetensors(&buf, b, LoadOptions{Keys: km}); err != nil {
		t.Fatal(err)
	}
	if !sameData(modelData(t, a), modelData(t, b)) {
		t.Error("KeyMap round trip differs")
	}
	for _, c := range []struct {
		km   KeyMap
		want string
	}{
		{KeyMap{Rename: func(string) string { return "x" }}, `KeyMap.Rename maps both "0.W" and "0.B" to "x"`},
		{KeyMap{Transposed: []string{"0.B"}}, `KeyMap.Transposed names "0.B" of shape [3], which is not 2-D`},
		{KeyMap{Transposed: []string{"1.W"}}, `KeyMap.Transposed names ["1.W"], which is not a tensor of the model`},
	} {
		if _, err := LoadSafetensors(bytes.NewReader(nil), b, LoadOptions{Keys: c.km}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

func TestPyTorchKeys(t *testing.T) {
	dev := openDev(t)
	km, err := PyTorchKeys(newBNNet(dev, 1))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range []string{"0.W", "0.B", "1.Gain", "1.Bias", "1.RunningMean", "1.RunningVar", "4.W", "4.B", "other"} {
		got = append(got, km.Rename(n))
	}
	want := []string{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "4.weight", "4.bias", "other"}
	if !slices.Equal(got, want) || !slices.Equal(km.Transposed, []string{"4.W"}) {
		t.Errorf("PyTorchKeys: %q transposed %q,\nwant %q transposed [4.W]", got, km.Transposed, want)
	}
}

func readFixture(t *testing.T, name string) *safetensors.File {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// checkTorchOutput runs m on the fixture's input and compares with
// PyTorch's output.
func checkTorchOutput(t *testing.T, dev *core.Device, m Module, io *safetensors.File, tol float64) {
	t.Helper()
	in, _ := io.Tensor("input")
	want, _ := io.Tensor("output")
	y := m.Forward(dev.Tensor(in.Data, in.Shape...))
	if !slices.Equal(y.Shape(), want.Shape) {
		t.Fatalf("output of shape %v, PyTorch's %v", y.Shape(), want.Shape)
	}
	got, err := y.Data()
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i := range got {
		worst = max(worst, math.Abs(float64(got[i]-want.Data[i])))
	}
	if worst > tol {
		t.Errorf("largest difference from PyTorch's output %.3g, want <= %g", worst, tol)
	}
	t.Logf("largest difference from PyTorch's output: %.3g over %d values", worst, len(got))
}

// TestTorchInteropMLP loads the state_dict of PyTorch's Sequential(Linear(4,
// 8), ReLU, Linear(8, 3), LayerNorm(3)), written by testdata/make_fixture.py,
// into the same ag architecture through PyTorchKeys (strict), and compares
// outputs on PyTorch's input. The F16 and BF16 copies of the same
// state_dict, converted by PyTorch, must read as ag's rounding of the F32
// values.
func TestTorchInteropMLP(t *testing.T) {
	dev := openDev(t)
	r := rand.New(rand.NewPCG(9, 9))
	m := Sequential{NewLinear(dev, 4, 8, true, r), Func(core.ReLU), NewLinear(dev, 8, 3, true, r), NewLayerNorm(dev, 3, 1e-5, true)}
	km, err := PyTorchKeys(m)
	if err != nil {
		t.Fatal(err)
	}
	fh, err := os.Open("testdata/torch_mlp.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	rep, err := LoadSafetensors(fh, m, LoadOptions{Keys: km})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Metadata["format"] != "pt" {
		t.Errorf("metadata %v", rep.Metadata)
	}
	checkTorchOutput(t, dev, m, readFixture(t, "torch_mlp_io.safetensors"), 1e-5)

	f32 := readFixture(t, "torch_mlp.safetensors")
	for _, c := range []struct {
		file  string
		round func(float32) float32
	}{{"torch_mlp_f16.safetensors", backend.RoundF16}, {"torch_mlp_bf16.safetensors", backend.RoundBF16}} {
		half := readFixture(t, c.file)
		for _, h := range half.Tensors {
			full, ok := f32.Tensor(h.Name)
			if !ok {
				t.Fatalf("%s: %q not in the F32 file", c.file, h.Name)
			}
			for i, x := range full.Data {
				if h.Data[i] != c.round(x) {
					t.Fatalf("%s: %s[%d]: PyTorch's %g, ag's rounding of %g is %g", c.file, h.Name, i, h.Data[i], x, c.round(x))
				}
			}
		}
	}
}

// TestTorchInteropConvNet loads PyTorch's Sequential(Conv2d(2, 3, 3,
// padding=1), BatchNorm2d(3), ReLU, Flatten, Linear(48, 5)) in evaluation
// mode, strict: its num_batches_tracked (an I64 buffer ag does not keep)
// is in PyTorchKeys' Ignore, skipped and reported; without that, a strict
// load fails on it and a non-strict one reports it unexpected.
func TestTorchInteropConvNet(t *testing.T) {
	dev := openDev(t)
	m := newBNNet(dev, 7)
	SetTraining(m, false)
	km, err := PyTorchKeys(m)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(km.Ignore, []string{"1.num_batches_tracked"}) {
		t.Errorf("PyTorchKeys' Ignore %q, want the BatchNorm's num_batches_tracked", km.Ignore)
	}
	b, err := os.ReadFile("testdata/torch_conv.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	before := modelData(t, m)
	bare := km
	bare.Ignore = nil
	_, err = LoadSafetensors(bytes.NewReader(b), m, LoadOptions{Keys: bare})
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `unexpected keys ["1.num_batches_tracked"]`) {
		t.Errorf("strict: %v", err)
	}
	if !sameData(before, modelData(t, m)) {
		t.Error("the refused strict load changed the model")
	}
	rep, err := LoadSafetensors(bytes.NewReader(b), m, LoadOptions{NonStrict: true, Keys: bare})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != nil || !slices.Equal(rep.Unexpected, []string{"1.num_batches_tracked"}) {
		t.Errorf("non-strict report %+v", rep)
	}
	m = newBNNet(dev, 8)
	SetTraining(m, false)
	rep, err = LoadSafetensors(bytes.NewReader(b), m, LoadOptions{Keys: km})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != nil || rep.Unexpected != nil || !slices.Equal(rep.Ignored, []string{"1.num_batches_tracked"}) {
		t.Errorf("report %+v", rep)
	}
	checkTorchOutput(t, dev, m, readFixture(t, "torch_conv_io.safetensors"), 1e-5)
	// Ignore may not name a key of the model.
	km.Ignore = append(km.Ignore, "1.running_mean")
	if _, err := LoadSafetensors(bytes.NewReader(b), m, LoadOptions{Keys: km}); err == nil || !strings.Contains(err.Error(), `KeyMap.Ignore lists "1.running_mean", the key of the model's "1.RunningMean"`) {
		t.Errorf("Ignore of a model's key: %v", err)
	}
}

func TestOptimizerSafetensors(t *testing.T) {
	dev := openDev(t)
	for _, kind := range []string{"adam", "amsgrad", "sgd", "rmsprop"} {
		a := newStateFixture(t, dev, kind, 1)
		a.opt.SetStepCount(5)
		var buf bytes.Buffer
		if err := SaveOptimizerSafetensors(&buf, a.model, a.opt); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		f, _ := safetensors.Read(bytes.NewReader(buf.Bytes()))
		if k := f.Tensors[0].Name; k != a.opt.Kind()+"."+a.opt.StateSlots()[0]+".0.W" {
			t.Errorf("%s: first key %q", kind, k)
		}
		b := newStateFixture(t, dev, kind, 2)
		setLR(b.opt, 0.5)
		got, err := LoadOptimizerSafetensors(bytes.NewReader(buf.Bytes()), b.model, b.opt, OptimizerLoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if got.Kind != a.opt.Kind() || got.Step != a.opt.StepCount() || got.Hyperparameters["lr"] != a.opt.Hyperparameters()["lr"] {
			t.Errorf("%s: file %+v", kind, got)
		}
		if b.opt.Hyperparameters()["lr"] != float64(float32(0.5)) {
			t.Errorf("%s: lr changed to %g without Hyperparameters set", kind, b.opt.Hyperparameters()["lr"])
		}
		sa, _ := a.opt.State()
		sb, _ := b.opt.State()
		if !sameData(tensorsData(t, sa), tensorsData(t, sb)) || b.opt.StepCount() != a.opt.StepCount() {
			t.Errorf("%s: state or step not loaded", kind)
		}
		if _, err := LoadOptimizerSafetensors(bytes.NewReader(buf.Bytes()), b.model, b.opt, OptimizerLoadOptions{Hyperparameters: true}); err != nil {
			t.Fatal(err)
		}
		if b.opt.Hyperparameters()["lr"] != a.opt.Hyperparameters()["lr"] {
			t.Errorf("%s: lr %g not restored", kind, b.opt.Hyperparameters()["lr"])
		}
	}
	// Refusals: another kind, a corrupt step, a hyperparameter out of range.
	a := newStateFixture(t, dev, "adam", 1)
	var buf bytes.Buffer
	SaveOptimizerSafetensors(&buf, a.model, a.opt)
	sgd := newStateFixture(t, dev, "sgd", 1)
	if _, err := LoadOptimizerSafetensors(bytes.NewReader(buf.Bytes()), sgd.model, sgd.opt, OptimizerLoadOptions{}); !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `file has optimizer "adam", loading into "sgd"`) {
		t.Errorf("kind: %v", err)
	}
	for _, c := range []struct{ from, to, want string }{
		{`"step":"1"`, `"step":"-1"`, `step "-1"`},
		{`"hyper.lr":"`, `"hyper.lr":"-`, `hyperparameter "lr" is -`},
		{`"adam.m.0.W"`, `"adam.m.0.X"`, `tensor "adam.m.0.W" missing`},
	} {
		b := newStateFixture(t, dev, "adam", 2)
		st, _ := b.opt.State()
		before := tensorsData(t, st)
		bad := bytes.Replace(buf.Bytes(), []byte(c.from), []byte(c.to), 1)
		if bytes.Equal(bad, buf.Bytes()) {
			t.Fatalf("%q not in the file", c.from)
		}
		// keep the header length right after a one-byte insertion: pad or cut the trailing spaces
		_, err := LoadOptimizerSafetensors(bytes.NewReader(fixLength(bad, len(c.to)-len(c.from))), b.model, b.opt, OptimizerLoadOptions{})
		if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.want, err)
		}
		if !sameData(before, tensorsData(t, st)) || b.opt.StepCount() != 1 {
			t.Errorf("%s: the refused load changed the optimizer", c.want)
		}
	}
}

// fixLength adds grow to the header length of a file whose header grew.
func fixLength(b []byte, grow int) []byte {
	n := binary.LittleEndian.Uint64(b)
	binary.LittleEndian.PutUint64(b, uint64(int(n)+grow))
	return b
}

func tensorsData(t *testing.T, ts []*core.Tensor) [][]float32 {
	t.Helper()
	var out [][]float32
	for _, x := range ts {
		v, err := x.Data()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func setLR(o Checkpointer, lr float64) {
	h := o.Hyperparameters()
	h["lr"] = lr
	o.SetHyperparameters(h)
}

// TestSafetensorsStrictByDefault: the zero LoadOptions is strict, as
// PyTorch's load_state_dict: a file whose keys do not match (here
// PyTorch's, loaded without PyTorchKeys) is an error naming the keys, and
// the model is left as it was.
func TestSafetensorsStrictByDefault(t *testing.T) {
	dev := openDev(t)
	m := MLP(dev, []int{3, 4, 2}, core.ReLU, rand.New(rand.NewPCG(5, 5)))
	f := &safetensors.File{}
	for _, p := range []struct {
		key   string
		shape []int
	}{{"0.weight", []int{4, 3}}, {"0.bias", []int{4}}, {"2.weight", []int{2, 4}}, {"2.bias", []int{2}}} {
		f.Tensors = append(f.Tensors, safetensors.Tensor{Name: p.key, Shape: p.shape, Data: make([]float32, numElems(p.shape))})
	}
	var file bytes.Buffer
	if err := safetensors.Write(&file, f); err != nil {
		t.Fatal(err)
	}
	before := modelData(t, m)
	rep, err := LoadSafetensors(bytes.NewReader(file.Bytes()), m, LoadOptions{})
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), `4 missing keys ["0.W" "0.B" "2.W" "2.B"], 4 unexpected keys ["0.weight" "0.bias" "2.weight" "2.bias"]`) {
		t.Errorf("default options: %v", err)
	}
	if err != nil && !strings.Contains(err.Error(), "PyTorchKeys") {
		t.Errorf("default options: %v: want a pointer to nn.PyTorchKeys for PyTorch's keys", err)
	}
	if len(rep.Missing) != 4 || len(rep.Unexpected) != 4 {
		t.Errorf("report %+v", rep)
	}
	if !sameData(before, modelData(t, m)) {
		t.Error("a refused load changed the model")
	}
	// Many keys: the first few and the count.
	big := MLP(dev, []int{3, 4, 4, 4, 4, 4, 2}, core.ReLU, rand.New(rand.NewPCG(5, 5)))
	_, err = LoadSafetensors(bytes.NewReader(file.Bytes()), big, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), `12 missing keys ["0.W" "0.B" "2.W" "2.B" "4.W" "4.B" "6.W" "6.B"] and 4 more`) {
		t.Errorf("many keys: %v", err)
	}
}
