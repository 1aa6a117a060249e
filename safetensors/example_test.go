package safetensors_test

import (
	"bytes"
	"fmt"

	"github.com/ag-go/ag/safetensors"
)

// Write two tensors, one as f16 (0.1 rounds to the nearest half value),
// and read them back.
func Example() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, &safetensors.File{
		Metadata: map[string]string{"format": "pt"},
		Tensors: []safetensors.Tensor{
			{Name: "0.weight", Shape: []int{2, 2}, Data: []float32{1, 2, 3, 4}},
			{Name: "0.bias", DType: safetensors.F16, Shape: []int{2}, Data: []float32{0.1, -1}},
		},
	})
	if err != nil {
		panic(err)
	}
	f, err := safetensors.Read(&buf)
	if err != nil {
		panic(err)
	}
	for _, t := range f.Tensors {
		fmt.Println(t.Name, t.DType, t.Shape, t.Data)
	}
	fmt.Println(f.Metadata)
	// Output:
	// 0.weight F32 [2 2] [1 2 3 4]
	// 0.bias F16 [2] [0.099975586 -1]
	// map[format:pt]
}
