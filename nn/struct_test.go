package nn

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/safetensors"
)

// convNet is a model written as a Go struct, as a PyTorch user writes a
// Module subclass: layers in exported fields, its own Forward and Params,
// no SetTraining and no Buffers.
type convNet struct {
	Conv *Conv2d
	BN   *BatchNorm
	Drop *Dropout
	Head *Linear
}

func newConvNet(dev *core.Device, seed uint64) *convNet {
	r := NewRNG(seed)
	n := &convNet{
		Conv: NewConv2d(dev, 2, 3, [2]int{3, 3}, ConvOptions{Padding: 1}, r),
		BN:   NewBatchNorm2d(dev, 3, 1e-5, 0.1, true),
		Drop: NewDropout(0.5),
		Head: NewLinear(dev, 3*4*4, 5, true, r),
	}
	n.BN.RunningMean.WriteAt(0, []float32{0.1, -0.2, 0.3})
	n.BN.RunningVar.WriteAt(0, []float32{1.5, 0.5, 2})
	return n
}

func (n *convNet) Forward(x *core.Tensor) *core.Tensor {
	h := core.ReLU(n.BN.Forward(n.Conv.Forward(x)))
	return n.Head.Forward(n.Drop.Forward(Flatten{}.Forward(h)))
}

func (n *convNet) Params() []*core.Tensor {
	return slices.Concat(n.Conv.Params(), n.BN.Params(), n.Head.Params())
}

// nested holds struct models in every kind of place the walk follows:
// a slice, a map with string keys, an array, an embedded field, a value
// (not a pointer) field, a Checkpointed wrapper.
type nested struct {
	*convNet
	List  []*convNet
	ByKey map[string]Module
	Pair  [1]*Dropout
	Norm  BatchNorm
	Ckpt  Checkpointed
}

func (n *nested) Forward(x *core.Tensor) *core.Tensor { return x }

func (n *nested) Params() []*core.Tensor {
	ps := n.convNet.Params()
	for _, m := range n.List {
		ps = append(ps, m.Params()...)
	}
	ps = append(ps, n.ByKey["a"].Params()...)
	ps = append(ps, n.Norm.Params()...)
	return append(ps, n.Ckpt.Params()...)
}

func newNested(dev *core.Device) *nested {
	return &nested{
		convNet: newConvNet(dev, 1),
		List:    []*convNet{newConvNet(dev, 2)},
		ByKey:   map[string]Module{"a": Sequential{newConvNet(dev, 3)}},
		Pair:    [1]*Dropout{NewDropout(0.2)},
		Norm:    *NewBatchNorm1d(dev, 2, 1e-5, 0.1, false),
		Ckpt:    Checkpointed{Module: newConvNet(dev, 4)},
	}
}

// modes lists the Training flag of every moded layer of a nested.
func (n *nested) modes() []bool {
	var on []bool
	for _, c := range []*convNet{n.convNet, n.List[0], n.ByKey["a"].(Sequential)[0].(*convNet), n.Ckpt.Module.(*convNet)} {
		on = append(on, c.BN.Training, c.Drop.Training)
	}
	return append(on, n.Pair[0].Training, n.Norm.Training)
}

// TestStructModelModes: Eval and Train reach every layer of a struct
// model, so two evaluation forwards agree.
func TestStructModelModes(t *testing.T) {
	dev := openDev(t)
	net := newConvNet(dev, 1)
	x := dev.Tensor(randVals(NewRNG(5), 4*2*4*4), 4, 2, 4, 4)
	Eval(net)
	if net.BN.Training || net.Drop.Training {
		t.Fatalf("after Eval: BatchNorm training %v, Dropout training %v", net.BN.Training, net.Drop.Training)
	}
	a, err := net.Forward(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	b, err := net.Forward(x).Data()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(a, b) {
		t.Errorf("two evaluation forwards differ: %v, %v", a[:5], b[:5])
	}
	Train(net)
	if !net.BN.Training || !net.Drop.Training {
		t.Errorf("after Train: BatchNorm training %v, Dropout training %v", net.BN.Training, net.Drop.Training)
	}

	n := newNested(dev)
	Eval(n)
	if on := n.modes(); slices.Contains(on, true) {
		t.Errorf("after Eval, modes %v: want every one false", on)
	}
	Train(n)
	if on := n.modes(); slices.Contains(on, false) {
		t.Errorf("after Train, modes %v: want every one true", on)
	}
}

// TestStructModelBuffers: a struct model's BatchNorm statistics are its
// buffers, named, saved and loaded by every state path.
func TestStructModelBuffers(t *testing.T) {
	dev := openDev(t)
	a, b := newConvNet(dev, 1), newConvNet(dev, 2)
	b.BN.RunningMean.WriteAt(0, []float32{0, 0, 0})
	if got := Buffers(a); !slices.Equal(got, []*core.Tensor{a.BN.RunningMean, a.BN.RunningVar}) {
		t.Fatalf("Buffers: %d tensors, want the BatchNorm's running mean and variance", len(got))
	}
	st, err := NamedState(a)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Conv.W", "Conv.B", "BN.Gain", "BN.Bias", "Head.W", "Head.B", "BN.RunningMean", "BN.RunningVar"}
	if !slices.Equal(names(st), want) {
		t.Errorf("NamedState %q, want %q", names(st), want)
	}

	var file bytes.Buffer
	if err := SaveSafetensors(&file, a, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Read(bytes.NewReader(file.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Tensor("BN.RunningVar"); !ok {
		t.Errorf("SaveSafetensors wrote no BN.RunningVar")
	}
	if _, err := LoadSafetensors(bytes.NewReader(file.Bytes()), b, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	if !sameData(modelData(t, a), modelData(t, b)) {
		t.Error("LoadSafetensors: the loaded model differs from the saved one")
	}

	file.Reset()
	if err := SaveState(&file, a, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(file.String(), `"buffer.1"`) {
		t.Errorf("SaveState wrote no buffers: %.300q", file.String())
	}
	c := newConvNet(dev, 3)
	c.BN.RunningVar.WriteAt(0, []float32{9, 9, 9})
	if err := LoadState(bytes.NewReader(file.Bytes()), c, nil); err != nil {
		t.Fatal(err)
	}
	if !sameData(modelData(t, a), modelData(t, c)) {
		t.Error("LoadState: the loaded model differs from the saved one")
	}
	// Evaluated, the two models agree.
	x := dev.Tensor(randVals(NewRNG(5), 2*2*4*4), 2, 2, 4, 4)
	ya, _ := Eval(a).Forward(x).Data()
	yc, _ := Eval(c).Forward(x).Data()
	if !slices.Equal(ya, yc) {
		t.Errorf("evaluation after LoadState: %v, want %v", yc, ya)
	}

	// Nested places: every BatchNorm's statistics, in field order.
	n := newNested(dev)
	bs, err := NamedBuffers(n)
	if err != nil {
		t.Fatal(err)
	}
	want = []string{"BN.RunningMean", "BN.RunningVar", "List.0.BN.RunningMean", "List.0.BN.RunningVar",
		"ByKey.a.0.BN.RunningMean", "ByKey.a.0.BN.RunningVar", "Norm.RunningMean", "Norm.RunningVar",
		"Ckpt.BN.RunningMean", "Ckpt.BN.RunningVar"}
	if !slices.Equal(names(bs), want) {
		t.Errorf("NamedBuffers %q, want %q", names(bs), want)
	}

	// A file written before the walk, without the statistics, is refused.
	var oldFile bytes.Buffer
	if err := SaveState(&oldFile, paramsOnly(a.Params()), nil); err != nil {
		t.Fatal(err)
	}
	err = LoadState(bytes.NewReader(oldFile.Bytes()), c, nil)
	if !errors.Is(err, ErrStateMismatch) || !strings.Contains(err.Error(), "without the model's 2 buffers") {
		t.Errorf("a file without the buffers: %v", err)
	}
}

// paramsOnly is a module of given parameters, no buffers.
type paramsOnly []*core.Tensor

func (p paramsOnly) Forward(x *core.Tensor) *core.Tensor { return x }
func (p paramsOnly) Params() []*core.Tensor              { return p }

// hiddenBN keeps its BatchNorm where the walk over exported fields cannot
// reach it; hiddenDrop its Dropout.
type hiddenBN struct {
	Head *Linear
	bn   *BatchNorm
}

func (h *hiddenBN) Forward(x *core.Tensor) *core.Tensor { return h.Head.Forward(h.bn.Forward(x)) }
func (h *hiddenBN) Params() []*core.Tensor              { return h.Head.Params() }

type hiddenDrop struct {
	Head   *Linear
	layers []Module
}

func (h *hiddenDrop) Forward(x *core.Tensor) *core.Tensor {
	return h.Head.Forward(h.layers[0].Forward(x))
}
func (h *hiddenDrop) Params() []*core.Tensor { return h.Head.Params() }

// ownModes keeps its Dropout unexported but passes the mode itself.
type ownModes struct{ hiddenDrop }

func (o *ownModes) SetTraining(on bool) {
	for _, l := range o.layers {
		SetTraining(l, on)
	}
}

// byValue is a model passed by value: its BatchNorm field cannot be set.
type byValue struct{ BN BatchNorm }

func (b byValue) Forward(x *core.Tensor) *core.Tensor { return b.BN.Forward(x) }
func (b byValue) Params() []*core.Tensor              { return nil }

// byIndex keys its layers by number: a map the walk does not name.
type byIndex struct{ Layers map[int]*Dropout }

func (b *byIndex) Forward(x *core.Tensor) *core.Tensor { return x }
func (b *byIndex) Params() []*core.Tensor              { return nil }

// TestStructModelHidden: a layer with modes or buffers that the walk
// cannot reach is refused, naming the type and the field; never skipped.
func TestStructModelHidden(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(1)
	hb := &hiddenBN{Head: NewLinear(dev, 2, 2, true, r), bn: NewBatchNorm1d(dev, 2, 1e-5, 0.1, true)}
	hd := &hiddenDrop{Head: NewLinear(dev, 2, 2, true, r), layers: []Module{Func(core.Tanh), NewDropout(0.5)}}
	checkPanics(t, []panicCase{
		{"Eval of a hidden BatchNorm", "nn.Eval: *nn.hiddenBN's unexported field bn holds a *nn.BatchNorm", func() { Eval(hb) }},
		{"Train of a hidden Dropout", "nn.Train: *nn.hiddenDrop's unexported field layers holds a *nn.Dropout", func() { Train(hd) }},
		{"SetTraining in a Sequential", "nn.SetTraining: *nn.hiddenDrop's unexported field layers", func() { SetTraining(Sequential{hd}, false) }},
		{"Buffers", "nn.Buffers: *nn.hiddenBN's unexported field bn holds a *nn.BatchNorm", func() { Buffers(hb) }},
		{"Eval of a map[int]", `nn.Eval: field Layers of nn.byIndex (at "Layers") holds a *nn.Dropout, which has modes (nn.Trainable), in a map whose keys are not strings`, func() { Eval(&byIndex{map[int]*Dropout{1: NewDropout(0.1)}}) }},
		{"Eval of a value", "nn.Eval: field BN of nn.byValue (at \"BN\") is a nn.BatchNorm that cannot be set", func() { Eval(byValue{}) }},
	})
	var buf bytes.Buffer
	for _, c := range []struct {
		name string
		err  error
	}{
		{"SaveState", SaveState(&buf, hb, nil)},
		{"SaveSafetensors", SaveSafetensors(&buf, hb, SaveOptions{})},
		{"NamedState", func() error { _, err := NamedState(hb); return err }()},
		{"LoadState", LoadState(bytes.NewReader(nil), hb, nil)},
		{"LoadSafetensors", func() error { _, err := LoadSafetensors(bytes.NewReader(nil), hb, LoadOptions{}); return err }()},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), "nn."+c.name+": *nn.hiddenBN's unexported field bn holds a *nn.BatchNorm") {
			t.Errorf("%s: %v", c.name, c.err)
		}
	}
	// A hidden Dropout has no buffers: saving is fine.
	buf.Reset()
	if err := SaveState(&buf, hd, nil); err != nil {
		t.Errorf("SaveState of a hidden Dropout: %v", err)
	}
	// A module that passes its modes itself is trusted with them.
	own := &ownModes{*hd}
	Eval(own)
	if hd.layers[1].(*Dropout).Training {
		t.Error("ownModes: its SetTraining was not called")
	}
}
