// Package metrics computes classification metrics on the device, as
// tensors recorded like any op: reading one is a sync of a few floats,
// and inside a captured step they cost no extra run.
//
// Logits are [batch, classes]; labels and predictions are [batch] class
// indices as f32 whole numbers (core.CrossEntropy's labels). Host labels
// outside 0..classes-1 fail the sync that uploads them (core.OneHot).
package metrics

import (
	"fmt"

	"github.com/ag-go/ag/core"
)

func check(fn string, logits, labels *core.Tensor) {
	if logits == nil || labels == nil {
		panic(fmt.Sprintf("metrics.%s: nil tensor", fn))
	}
	if logits.Rank() != 2 || labels.Rank() != 1 || labels.Dim(0) != logits.Dim(0) {
		panic(fmt.Sprintf("metrics.%s: logits %v and labels %v, want [batch, classes] and [batch]", fn, logits.Shape(), labels.Shape()))
	}
}

// Accuracy is the fraction of rows whose ArgMax is the label, as a [1]
// tensor: PyTorch's (logits.argmax(1) == labels).float().mean(). Ties and
// NaN follow core.ArgMax: the first maximum wins, a NaN is the maximum.
func Accuracy(logits, labels *core.Tensor) *core.Tensor {
	check("Accuracy", logits, labels)
	return core.Reshape(core.Mean(core.Equal(core.ArgMax(logits, 1, false), labels)), 1)
}

// TopKAccuracy is the fraction of rows whose label is among the k
// highest logits, as a [1] tensor, without a sort: a row counts when the
// label's rank - the number of logits before it in ArgMax's order
// (greater, or equal at a lower index; a NaN before every number) - is
// below k. So TopKAccuracy(x, y, 1) is Accuracy(x, y) in every case, and a
// label tied with others takes the place its index gives it, as a stable
// descending sort would (PyTorch's topk leaves the order of ties open).
func TopKAccuracy(logits, labels *core.Tensor, k int) *core.Tensor {
	check("TopKAccuracy", logits, labels)
	classes := logits.Dim(1)
	if k < 1 {
		panic(fmt.Sprintf("metrics.TopKAccuracy: k %d, want >= 1", k))
	}
	dev := logits.Device()
	// the label's logit, selected exactly (a product with the one-hot row
	// would turn an infinite logit elsewhere into NaN)
	onehot := core.OneHot(labels, classes)
	ly := core.SumAxis(core.Where(onehot, logits, dev.Full(0, 1, 1)), 1, true) // [batch, 1]
	nanX := core.NotEqual(logits, logits)
	nanY := core.NotEqual(ly, ly)
	beats := core.Add(core.Greater(logits, ly), core.Mul(nanX, core.Affine(nanY, -1, 1)))
	ties := core.Add(core.Equal(logits, ly), core.Mul(nanX, nanY))
	idx := make([]float32, classes)
	for i := range idx {
		idx[i] = float32(i)
	}
	before := core.Less(dev.Constant(idx, 1, classes), core.Reshape(labels, labels.Dim(0), 1))
	rank := core.SumAxis(core.Add(beats, core.Mul(ties, before)), 1, false)
	return core.Reshape(core.Mean(core.LessScalar(rank, float32(k))), 1)
}

// ConfusionMatrix counts, as a [classes, classes] tensor, the rows of each
// label (row) and prediction (column), sklearn's convention:
// M[i][j] = #{n: labels[n] = i, pred[n] = j}. pred is class indices (e.g.
// core.ArgMax(logits, 1, false)). It is one product of one-hot matrices;
// counts are exact below 2^24.
func ConfusionMatrix(pred, labels *core.Tensor, classes int) *core.Tensor {
	if pred == nil || labels == nil {
		panic("metrics.ConfusionMatrix: nil tensor")
	}
	if pred.Rank() != 1 || labels.Rank() != 1 || pred.Dim(0) != labels.Dim(0) || classes < 1 {
		panic(fmt.Sprintf("metrics.ConfusionMatrix: predictions %v, labels %v, %d classes: want two [batch] tensors and classes >= 1",
			pred.Shape(), labels.Shape(), classes))
	}
	return core.MatMulT(core.OneHot(labels, classes), core.OneHot(pred, classes), true, false)
}
