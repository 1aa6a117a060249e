package nn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/ag-go/ag/core"
)

// torchLayerCase is one case of testdata/torch_layers.safetensors (see
// make_layers_torch.py).
type torchLayerCase struct {
	Name, Kind, Mode                  string
	Groups, C, Cin, Cout              int
	Affine, Bias                      bool
	AlignCorners                      bool `json:"align_corners"`
	Kernel, Stride, Padding, Dilation json.RawMessage
	OutputPadding                     json.RawMessage `json:"output_padding"`
	Scale                             float64
	Size                              [2]int
}

// pair reads an int or a [2]int of the fixture's JSON.
func pair(t *testing.T, raw json.RawMessage) [2]int {
	var p [2]int
	if err := json.Unmarshal(raw, &p); err == nil {
		return p
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("fixture: %s is no int or pair: %v", raw, err)
	}
	return [2]int{v, v}
}

// TestTorchLayers compares GroupNorm, InstanceNorm1d/2d, ConvTranspose1d/2d
// and Upsample with PyTorch 1.13's outputs for the same inputs and
// parameters.
func TestTorchLayers(t *testing.T) {
	dev := openDev(t)
	f := readFixture(t, "torch_layers.safetensors")
	var cases []torchLayerCase
	if err := json.Unmarshal([]byte(f.Metadata["cases"]), &cases); err != nil {
		t.Fatalf("fixture metadata: %v", err)
	}
	kinds := map[string]int{}
	tensor := func(name string) *core.Tensor {
		v, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("fixture has no %s", name)
		}
		return dev.Param(v.Data, v.Shape...)
	}
	r := NewRNG(3)
	for _, tc := range cases {
		kinds[tc.Kind]++
		var m Module
		switch tc.Kind {
		case "groupnorm", "instancenorm1d", "instancenorm2d":
			var g *GroupNorm
			switch tc.Kind {
			case "groupnorm":
				g = NewGroupNorm(dev, tc.Groups, tc.C, 1e-5, tc.Affine)
			case "instancenorm1d":
				g = NewInstanceNorm1d(dev, tc.C, 1e-5, tc.Affine)
			default:
				g = NewInstanceNorm2d(dev, tc.C, 1e-5, tc.Affine)
			}
			if tc.Affine {
				g.Gain, g.Bias = tensor(tc.Name+".weight"), tensor(tc.Name+".bias")
			}
			m = g
		case "convtranspose2d":
			k := pair(t, tc.Kernel)
			l := NewConvTranspose2d(dev, tc.Cin, tc.Cout, k, ConvTransposeOptions{NoBias: !tc.Bias}, r)
			l.Stride, l.Padding, l.OutputPadding, l.Dilation = pair(t, tc.Stride), pair(t, tc.Padding), pair(t, tc.OutputPadding), pair(t, tc.Dilation)
			l.W = tensor(tc.Name + ".weight")
			if tc.Bias {
				l.B = tensor(tc.Name + ".bias")
			}
			m = l
		case "convtranspose1d":
			l := NewConvTranspose1d(dev, tc.Cin, tc.Cout, pair(t, tc.Kernel)[0], ConvTransposeOptions{NoBias: !tc.Bias}, r)
			l.Stride, l.Padding, l.OutputPadding, l.Dilation = pair(t, tc.Stride)[0], pair(t, tc.Padding)[0], pair(t, tc.OutputPadding)[0], pair(t, tc.Dilation)[0]
			l.W = tensor(tc.Name + ".weight")
			if tc.Bias {
				l.B = tensor(tc.Name + ".bias")
			}
			m = l
		case "upsample":
			mode := map[string]UpsampleMode{"nearest": UpsampleNearest, "bilinear": UpsampleBilinear}[tc.Mode]
			if tc.Scale != 0 {
				m = NewUpsample(tc.Scale, mode, tc.AlignCorners)
			} else {
				m = NewUpsampleSize(tc.Size, mode, tc.AlignCorners)
			}
		default:
			t.Fatalf("fixture case %s of unknown kind %q", tc.Name, tc.Kind)
		}
		want, _ := f.Tensor(tc.Name + ".y")
		y := m.Forward(tensor(tc.Name + ".x"))
		if !slices.Equal(y.Shape(), want.Shape) {
			t.Errorf("%s %+v: shape %v, PyTorch's %v", tc.Name, tc, y.Shape(), want.Shape)
			continue
		}
		got, err := y.Data()
		if err != nil {
			t.Fatal(err)
		}
		w64 := make([]float64, len(want.Data))
		for i, v := range want.Data {
			w64[i] = float64(v)
		}
		checkNear(t, fmt.Sprintf("%s (%s)", tc.Name, tc.Kind), got, w64, 2e-5)
	}
	for _, k := range []string{"groupnorm", "instancenorm1d", "instancenorm2d", "convtranspose2d", "convtranspose1d", "upsample"} {
		if kinds[k] == 0 {
			t.Errorf("fixture has no case of %s", k)
		}
	}
}

// A PyTorch model of the new layers loads through PyTorchKeys (weight and
// bias of ConvTranspose2d, GroupNorm and InstanceNorm2d, strictly) and
// gives PyTorch's output.
func TestTorchLayersStateDict(t *testing.T) {
	dev := openDev(t)
	r := NewRNG(5)
	m := Sequential{
		NewConvTranspose2d(dev, 2, 3, [2]int{3, 3}, ConvTransposeOptions{Stride: 2, Padding: 1, OutputPadding: 1}, r),
		NewGroupNorm(dev, 3, 3, 1e-5, true),
		NewUpsample(2, UpsampleBilinear, false),
		NewInstanceNorm2d(dev, 3, 1e-5, true),
		NewConvTranspose2d(dev, 3, 1, [2]int{2, 2}, ConvTransposeOptions{NoBias: true}, r),
	}
	km, err := PyTorchKeys(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/torch_layers_seq.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := LoadSafetensors(bytes.NewReader(b), m, LoadOptions{Keys: km})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Missing)+len(rep.Unexpected) != 0 {
		t.Errorf("strict load: missing %q, unexpected %q", rep.Missing, rep.Unexpected)
	}
	f := readFixture(t, "torch_layers.safetensors")
	x, _ := f.Tensor("seq.x")
	want, _ := f.Tensor("seq.y")
	y := m.Forward(dev.Tensor(x.Data, x.Shape...))
	if !slices.Equal(y.Shape(), want.Shape) {
		t.Fatalf("output of shape %v, PyTorch's %v", y.Shape(), want.Shape)
	}
	got, err := y.Data()
	if err != nil {
		t.Fatal(err)
	}
	w64 := make([]float64, len(want.Data))
	for i, v := range want.Data {
		w64[i] = float64(v)
	}
	checkNear(t, "Sequential", got, w64, 5e-5)
}
