package data_test

import (
	"fmt"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/data"
)

// A dataset of 5 rows in batches of 2, without shuffling: the last batch
// is short; a second epoch starts after the first ends.
func Example() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	x := data.Table{Data: []float32{0, 1, 2, 3, 4}, Shape: []int{5, 1}}
	l, err := data.New(dev, data.Options{Batch: 2}, x)
	if err != nil {
		panic(err)
	}
	for {
		b, ok := l.Next()
		if !ok {
			break
		}
		v, _ := b[0].Data()
		fmt.Println(v)
	}
	fmt.Println("epochs:", l.Epoch(), "batches per epoch:", l.Batches())
	// Output:
	// [0 1]
	// [2 3]
	// [4]
	// epochs: 1 batches per epoch: 3
}
