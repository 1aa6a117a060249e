package core

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/backend"
)

// CrossEntropy is the mean softmax cross-entropy of logits [batch,
// classes] at integer labels [batch] (whole numbers as f32): -(1/batch)
// sum_i LogSoftmax(logits)_i[label_i], one composite op of the IR
// (backend.OpCrossEntropy) with its gradient another. Host labels outside
// 0..classes-1 are an error of the run, as OneHot's; labels computed on the
// device that are make the loss NaN. The labels get no gradient. More than
// backend.MaxClasses classes (2^24: f32 labels name no more exactly) fail
// the sync that runs it, naming the count.
func CrossEntropy(logits, labels *Tensor) *Tensor {
	needTensors("CrossEntropy", logits, labels)
	if logits.Rank() != 2 || labels.Rank() != 1 || labels.shape[0] != logits.shape[0] {
		panic(fmt.Sprintf("core.CrossEntropy: logits %v, labels %v: want [batch, classes] and [batch]", logits.shape, labels.shape))
	}
	return logits.dev.record("CrossEntropy", backend.OpCrossEntropy, []int{}, attrs{}, logits, labels)
}

var _ = defineComposite(backend.OpCrossEntropy, composite{
	grad: func(_ *Tensor, in []*Tensor, g *Tensor, k int) *Tensor {
		if k == 1 {
			return nil // the labels
		}
		return g.dev.recordGrad("CrossEntropyGrad", backend.OpCrossEntropyBack, slices.Clone(in[0].shape), attrs{}, false, in[0], in[1], g)
	},
	labels: func(t *Tensor) (*Tensor, int) { return t.inputs[1], t.inputs[0].shape[1] },
})

var _ = defineComposite(backend.OpCrossEntropyBack, composite{grad: noGrad})
