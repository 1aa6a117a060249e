package metrics_test

import (
	"fmt"

	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/metrics"
)

func Example() {
	dev, err := core.Open("cpu")
	if err != nil {
		panic(err)
	}
	defer dev.Close()
	logits := dev.Tensor([]float32{
		0.1, 2, 0.5, // predicts 1
		3, 1, 2, // predicts 0, then 2
		0, 1, 4, // predicts 2
		1, 0, 0.5, // predicts 0, then 2
	}, 4, 3)
	labels := dev.Tensor([]float32{1, 2, 2, 1}, 4)
	acc, _ := metrics.Accuracy(logits, labels).Item()
	top2, _ := metrics.TopKAccuracy(logits, labels, 2).Item()
	cm, _ := metrics.ConfusionMatrix(core.ArgMax(logits, 1, false), labels, 3).Data()
	fmt.Println(acc, top2)
	fmt.Println(cm[0:3], cm[3:6], cm[6:9])
	// Output:
	// 0.5 0.75
	// [0 0 0] [1 1 0] [1 0 1]
}
