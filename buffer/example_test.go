package buffer_test

import (
	"fmt"

	"github.com/ag-go/ag/buffer"
	"github.com/ag-go/ag/core"
)

// A buffer of 10 records of 3 floats: write two records, read them back,
// and gather records by index as the input of a matrix product.
func ExampleBuffer() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()

	buf, err := buffer.New(dev, 3, 10)
	if err != nil {
		panic(err)
	}
	if err := buf.Write(4, []float32{1, 2, 3, 4, 5, 6}); err != nil {
		panic(err)
	}
	recs, _ := buf.Read(4, 2)
	fmt.Println(recs)

	rows, err := buf.GetRows([]int{5, 4, 5}) // [3, 3], only the indices cross
	if err != nil {
		panic(err)
	}
	sums, _ := core.MatMul(rows, dev.Tensor([]float32{1, 1, 1}, 3, 1)).Data()
	fmt.Println(sums)

	fmt.Println(buf)
	fmt.Println(buf.Write(9, []float32{1, 2, 3, 4, 5, 6}))
	buf.Free()
	fmt.Println(buf)
	// Output:
	// [1 2 3 4 5 6]
	// [15 6 15]
	// <buffer> 3 x 10 f32 (device)
	// buffer.Write: records 9..10 are outside the buffer (capacity 10)
	// <buffer> 3 x 10 f32 (freed)
}
