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

// A replay buffer stored as f16: half the device memory of an f32 one (an
// odd width takes one value more a record). Values are rounded to f16 when
// written (0.1 becomes 0.099975586, 1e5 overflows to +Inf); reads and
// gathers give the stored values as f32, converted on the device.
func ExampleNewWithStorage() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()

	buf, err := buffer.NewWithStorage(dev, 4, 1_000_000, core.PrecisionF16)
	if err != nil {
		panic(err)
	}
	defer buf.Free()
	f32, _ := buffer.New(dev, 4, 1_000_000)
	fmt.Println(buf, buf.Bytes(), "bytes, f32:", f32.Bytes())
	f32.Free()

	if err := buf.Write(7, []float32{0.1, -2.5, 1e5, 3}); err != nil {
		panic(err)
	}
	recs, _ := buf.Read(7, 1)
	fmt.Println(recs)

	rows, err := buf.GetRows([]int{7, 0}) // [2, 4] f32, only the indices cross
	if err != nil {
		panic(err)
	}
	v, _ := rows.Data()
	fmt.Println(v)
	// Output:
	// <buffer> 4 x 1000000 f16 (device) 8000000 bytes, f32: 16000000
	// [0.099975586 -2.5 +Inf 3]
	// [0.099975586 -2.5 +Inf 3 0 0 0 0]
}
