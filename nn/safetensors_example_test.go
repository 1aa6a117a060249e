package nn_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/nn"
)

// Save a model's weights as safetensors and load them into a model of the
// same architecture (loads are strict by default); then into a deeper
// model, which is refused, and non-strict, which reports the keys the file
// lacks.
func ExampleLoadSafetensors() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	rng := rand.New(rand.NewPCG(1, 1))
	model := nn.MLP(dev, []int{2, 4, 1}, core.ReLU, rng)
	names, _ := nn.NamedParams(model)
	for _, n := range names {
		fmt.Println(n.Name, n.Tensor.Shape())
	}

	var file bytes.Buffer
	if err := nn.SaveSafetensors(&file, model, nn.SaveOptions{}); err != nil {
		panic(err)
	}
	same := nn.MLP(dev, []int{2, 4, 1}, core.ReLU, rng)
	if _, err := nn.LoadSafetensors(bytes.NewReader(file.Bytes()), same, nn.LoadOptions{}); err != nil {
		panic(err)
	}
	deeper := nn.MLP(dev, []int{2, 4, 1, 1}, core.ReLU, rng)
	_, err = nn.LoadSafetensors(bytes.NewReader(file.Bytes()), deeper, nn.LoadOptions{})
	fmt.Println(err)
	report, err := nn.LoadSafetensors(bytes.NewReader(file.Bytes()), deeper, nn.LoadOptions{NonStrict: true})
	fmt.Println(report.Missing, report.Unexpected, err)
	// Output:
	// 0.W [2 4]
	// 0.B [4]
	// 2.W [4 1]
	// 2.B [1]
	// nn.LoadSafetensors: 2 missing keys ["4.W" "4.B"], 0 unexpected keys [] (LoadOptions.NonStrict loads the keys that match): nn: state does not match
	// [4.W 4.B] [] <nil>
}

// Keys for a PyTorch model built layer for layer like the ag one:
// nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1)). Linear
// weights are transposed on the way in and out.
func ExamplePyTorchKeys() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	model := nn.MLP(dev, []int{2, 4, 1}, core.ReLU, rand.New(rand.NewPCG(1, 1)))
	keys, err := nn.PyTorchKeys(model)
	if err != nil {
		panic(err)
	}
	for _, n := range []string{"0.W", "0.B", "2.W", "2.B"} {
		fmt.Println(n, "->", keys.Rename(n))
	}
	fmt.Println("transposed:", keys.Transposed)
	// nn.LoadSafetensors(f, model, nn.LoadOptions{Keys: keys})
	// loads the file of PyTorch's state_dict.

	// Output:
	// 0.W -> 0.weight
	// 0.B -> 0.bias
	// 2.W -> 2.weight
	// 2.B -> 2.bias
	// transposed: [0.W 2.W]
}
