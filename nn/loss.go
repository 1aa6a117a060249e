package nn

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/core"
)

// MSELoss is mean((pred-target)^2) over all elements.
func MSELoss(pred, target *core.Tensor) *core.Tensor {
	if !slices.Equal(pred.Shape(), target.Shape()) {
		panic(fmt.Sprintf("nn.MSELoss: pred %v and target %v differ", pred.Shape(), target.Shape()))
	}
	d := core.Sub(pred, target)
	return core.Mean(core.Mul(d, d))
}

// CrossEntropy is -sum(target*log(pred))/batch for probabilities pred and
// target distributions of shape [batch, classes]. pred is clamped to
// [1e-7, 1] inside the log so a zero probability gives a finite loss.
func CrossEntropy(pred, target *core.Tensor) *core.Tensor {
	if pred.Rank() != 2 || !slices.Equal(pred.Shape(), target.Shape()) {
		panic(fmt.Sprintf("nn.CrossEntropy: pred %v and target %v must be the same [batch, classes]", pred.Shape(), target.Shape()))
	}
	ll := core.Mul(target, core.Log(core.Clamp(pred, 1e-7, 1)))
	return core.Scale(core.Sum(ll), -1/float32(pred.Dim(0)))
}

// SoftmaxCrossEntropy is the mean over the batch of -log softmax(logits)[label]
// for logits [batch, classes] and integer labels [batch] (0-based, as f32).
// Its gradient is (softmax - onehot)/batch, computed on the device.
func SoftmaxCrossEntropy(logits, labels *core.Tensor) *core.Tensor {
	if logits.Rank() != 2 || labels.Rank() != 1 || labels.Dim(0) != logits.Dim(0) {
		panic(fmt.Sprintf("nn.SoftmaxCrossEntropy: logits %v, labels %v: want [batch, classes] and [batch]", logits.Shape(), labels.Shape()))
	}
	oh := core.OneHot(labels, logits.Dim(1))
	ll := core.Mul(oh, core.LogSoftmax(logits))
	return core.Scale(core.Sum(ll), -1/float32(logits.Dim(0)))
}
