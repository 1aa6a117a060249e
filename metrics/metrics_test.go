package metrics

import (
	"math"
	"testing"

	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

var (
	nan, inf = float32(math.NaN()), float32(math.Inf(1))
	// seven rows of four classes: a plain row, ties, NaN and infinities
	logits = []float32{
		1, 3, 2, 0, // label 1: rank 0
		2, 2, 1, 5, // label 1: 5 is greater, the 2 at index 0 ties before it: rank 2
		0, nan, 1, 1, // label 2: the NaN beats it, the 1 at index 3 comes after: rank 1
		inf, -inf, 0, 7, // label 0: rank 0
		nan, 0, nan, 1, // label 2 (NaN): the NaN at index 0 ties before it: rank 1
		-1, -1, -1, -1, // label 0: rank 0
		-1, -1, -1, -1, // label 3: rank 3
	}
	labels = []float32{1, 1, 2, 0, 2, 0, 3}
)

func item(t *testing.T, x *core.Tensor) float32 {
	t.Helper()
	v, err := x.Item()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAccuracy checks Accuracy and TopKAccuracy against the ranks worked
// out by hand above; k = 1 agrees with ArgMax's ties and NaN.
func TestAccuracy(t *testing.T) {
	dev := testdev.Open(t)
	x, y := dev.Tensor(logits, 7, 4), dev.Tensor(labels, 7)
	if got := item(t, Accuracy(x, y)); math.Abs(float64(got)-3.0/7) > 1e-6 {
		t.Errorf("Accuracy = %g, want 3/7", got)
	}
	for k, want := range map[int]float64{1: 3.0 / 7, 2: 5.0 / 7, 3: 6.0 / 7, 4: 1, 9: 1} {
		if got := item(t, TopKAccuracy(x, y, k)); math.Abs(float64(got)-want) > 1e-6 {
			t.Errorf("TopKAccuracy(k=%d) = %g, want %g", k, got, want)
		}
	}
}

func TestConfusionMatrix(t *testing.T) {
	dev := testdev.Open(t)
	x, y := dev.Tensor(logits, 7, 4), dev.Tensor(labels, 7)
	// predictions 1, 3, 1, 0, 0, 0, 0 (ArgMax on the device)
	got, err := ConfusionMatrix(core.ArgMax(x, 1, false), y, 4).Data()
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{
		2, 0, 0, 0,
		0, 1, 0, 1,
		1, 1, 0, 0,
		1, 0, 0, 0,
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("confusion matrix %v, want %v", got, want)
		}
	}
}

func TestShapeChecks(t *testing.T) {
	dev := testdev.Open(t)
	for name, f := range map[string]func(){
		"labels of another batch": func() { Accuracy(dev.Tensor(logits, 7, 4), dev.Tensor(labels[:6], 6)) },
		"k 0":                     func() { TopKAccuracy(dev.Tensor(logits, 7, 4), dev.Tensor(labels, 7), 0) },
		"2-D predictions":         func() { ConfusionMatrix(dev.Tensor(labels, 7, 1), dev.Tensor(labels, 7), 4) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
