package nn

import (
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/ag-go/ag/core"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite nn/testdata's golden state files")

// goldenModels are the models of the state files in testdata, written by
// SaveState before it walked struct fields for buffers: files of these
// models must load, and saving again must write the same bytes, so that
// the positional layout never moves under existing files.
var goldenModels = map[string]func(dev *core.Device) (Module, Checkpointer){
	// a Sequential with a BatchNorm (buffers through Sequential.Buffers), Adam
	"state_v1_seq_bn_adam.agstate": func(dev *core.Device) (Module, Checkpointer) {
		r := rand.New(rand.NewPCG(1, 2))
		m := Sequential{NewLinear(dev, 3, 4, true, r), NewBatchNorm1d(dev, 4, 1e-5, 0.1, true), Func(core.ReLU), NewLinear(dev, 4, 2, true, r)}
		return m, NewAdamW(m.Params(), 0.01, 0.001)
	},
	// a struct model (a TransformerBlock, dropout inside), SGD with momentum
	"state_v1_block_sgd.agstate": func(dev *core.Device) (Module, Checkpointer) {
		m := NewTransformerBlock(dev, 4, 2, 8, true, 0.1, rand.New(rand.NewPCG(3, 4)))
		return m, NewSGD(m.Params(), 0.05, 0.9)
	},
}

// fillGolden gives every tensor of m and opt a value of its position, so
// a loaded file can be checked without the model that wrote it.
func fillGolden(t *testing.T, m Module, opt Checkpointer) []*core.Tensor {
	t.Helper()
	ts, err := stateTensors(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	for k, x := range ts {
		v := make([]float32, x.Len())
		for j := range v {
			v[j] = float32(k) + float32(j)/64
		}
		if err := x.WriteAt(0, v); err != nil {
			t.Fatal(err)
		}
	}
	opt.SetStepCount(3)
	return ts
}

func TestStateGoldenFiles(t *testing.T) {
	dev := openDev(t)
	for name, mk := range goldenModels {
		m, opt := mk(dev)
		want := fillGolden(t, m, opt)
		var buf bytes.Buffer
		if err := SaveState(&buf, m, opt); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if *updateGolden {
			if err := os.WriteFile("testdata/"+name, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		file, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), file) {
			t.Errorf("%s: SaveState writes %d bytes that differ from the golden file's %d: the layout moved", name, buf.Len(), len(file))
		}
		m2, opt2 := mk(dev)
		if err := LoadState(bytes.NewReader(file), m2, opt2); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := stateTensors(m2, opt2)
		if err != nil {
			t.Fatal(err)
		}
		if !sameData(tensorsData(t, want), tensorsData(t, got)) || opt2.StepCount() != 3 {
			t.Errorf("%s: loaded values or step (%d) differ from the saved ones", name, opt2.StepCount())
		}
	}
}
