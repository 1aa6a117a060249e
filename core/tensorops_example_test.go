package core_test

import (
	"fmt"
	"math"

	_ "github.com/ag-go/ag/backend/cpu"
	"github.com/ag-go/ag/core"
)

// show prints a tensor's shape and values.
func show(name string, t *core.Tensor) {
	v, err := t.Data()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(name, t.Shape(), v)
}

// arange is 0, 1, ..., n-1 in the given shape.
func arange(dev *core.Device, shape ...int) *core.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(i)
	}
	return dev.Tensor(v, shape...)
}

func ExampleIndexSelect() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := arange(dev, 2, 3) // [[0 1 2] [3 4 5]]
	show("columns 2, 0:", core.IndexSelect(x, 1, dev.Tensor([]float32{2, 0}, 2)))
	// Output:
	// columns 2, 0: [2 2] [2 0 5 3]
}

func ExampleGatherAxis() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := arange(dev, 2, 3) // [[0 1 2] [3 4 5]]
	// out[i][j] = x[i][idx[i][j]], as torch.gather(x, 1, idx)
	show("gathered:", core.GatherAxis(x, 1, dev.Tensor([]float32{2, 2, 0, 1}, 2, 2)))
	// Output:
	// gathered: [2 2] [2 2 3 4]
}

func ExampleSlice() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := arange(dev, 2, 5)
	show("x[:, 1::2]:", core.Slice(x, 1, 1, math.MaxInt, 2))
	show("x[:, -2:]:", core.Slice(x, -1, -2, math.MaxInt, 1))
	// Output:
	// x[:, 1::2]: [2 2] [1 3 6 8]
	// x[:, -2:]: [2 2] [3 4 8 9]
}

func ExampleNarrow() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	show("narrow:", core.Narrow(arange(dev, 2, 5), 1, 1, 3))
	// Output:
	// narrow: [2 3] [1 2 3 6 7 8]
}

func ExampleSplit() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	for _, p := range core.Split(arange(dev, 5), 0, 2) {
		show("piece:", p)
	}
	// Output:
	// piece: [2] [0 1]
	// piece: [2] [2 3]
	// piece: [1] [4]
}

func ExampleSplitSizes() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	for _, p := range core.SplitSizes(arange(dev, 2, 3), 1, 1, 2) {
		show("piece:", p)
	}
	// Output:
	// piece: [2 1] [0 3]
	// piece: [2 2] [1 2 4 5]
}

func ExampleChunk() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	for _, p := range core.Chunk(arange(dev, 5), 0, 4) { // 2, 2, 1: as torch.chunk
		show("chunk:", p)
	}
	// Output:
	// chunk: [2] [0 1]
	// chunk: [2] [2 3]
	// chunk: [1] [4]
}

func ExampleFlip() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	show("flipped:", core.Flip(arange(dev, 2, 3), 0, 1))
	// Output:
	// flipped: [2 3] [5 4 3 2 1 0]
}

func ExampleRoll() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	show("rolled by 1:", core.Roll(arange(dev, 5), 0, 1))
	show("rolled by -2:", core.Roll(arange(dev, 5), 0, -2))
	// Output:
	// rolled by 1: [5] [4 0 1 2 3]
	// rolled by -2: [5] [2 3 4 0 1]
}

func ExampleRepeat() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	show("repeated:", core.Repeat(arange(dev, 3), 2, 2))
	// Output:
	// repeated: [2 6] [0 1 2 0 1 2 0 1 2 0 1 2]
}

func ExampleTile() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	show("tiled:", core.Tile(arange(dev, 2, 2), 2)) // reps (2) count as (1, 2)
	// Output:
	// tiled: [2 4] [0 1 0 1 2 3 2 3]
}

func ExamplePad() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{1, 2, 3, 4}, 4)
	show("constant:", core.Pad(x, core.PadConstant, 9, 1, 2))
	show("reflect:", core.Pad(x, core.PadReflect, 0, 2, 2))
	show("replicate:", core.Pad(x, core.PadReplicate, 0, 2, 2))
	show("circular:", core.Pad(x, core.PadCircular, 0, 2, 2))
	// Output:
	// constant: [7] [9 1 2 3 4 9 9]
	// reflect: [8] [3 2 1 2 3 4 3 2]
	// replicate: [8] [1 1 1 2 3 4 4 4]
	// circular: [8] [3 4 1 2 3 4 1 2]
}

func ExampleScatterAdd() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Full(0, 5)
	idx := dev.Tensor([]float32{0, 1, 0, 4}, 4)
	show("counts:", core.ScatterAdd(x, 0, idx, dev.Full(1, 4)))
	// Output:
	// counts: [5] [2 1 0 0 1]
}

func ExampleScatter() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Full(0, 2, 3)
	idx := dev.Tensor([]float32{2, 0}, 2, 1)
	show("scattered:", core.Scatter(x, 1, idx, dev.Tensor([]float32{7, 8}, 2, 1)))
	// Output:
	// scattered: [2 3] [0 0 7 8 0 0]
}

func ExampleArgsort() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Tensor([]float32{2, float32(math.NaN()), 1, 2}, 4)
	show("ascending:", core.Argsort(x, 0, false)) // ties by index, NaN last
	show("descending:", core.Argsort(x, 0, true)) // NaN first
	// Output:
	// ascending: [4] [2 0 3 1]
	// descending: [4] [1 0 3 2]
}

func ExampleSort() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	v, i := core.Sort(dev.Tensor([]float32{3, 1, 2, 5, 4, 6}, 2, 3), 1, false)
	if err := dev.Sync(v, i); err != nil { // the values consume the indices: keep both
		fmt.Println(err)
		return
	}
	show("values:", v)
	show("indices:", i)
	// Output:
	// values: [2 3] [1 2 3 4 5 6]
	// indices: [2 3] [1 2 0 1 0 2]
}

func ExampleTopK() {
	dev, _ := core.Open("cpu")
	defer dev.Close()
	x := dev.Param([]float32{0.1, 0.7, 0.3, 0.7}, 4)
	v, i := core.TopK(x, 2, 0, true)
	i.Keep() // the values consume the indices: keep them to read both
	show("values:", v)
	show("indices:", i)
	if err := core.Sum(v).Backward(); err != nil {
		fmt.Println(err)
		return
	}
	show("gradient:", x.Grad())
	// Output:
	// values: [2] [0.7 0.7]
	// indices: [2] [1 3]
	// gradient: [4] [0 1 0 1]
}
