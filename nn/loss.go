package nn

import (
	"fmt"
	"slices"

	"github.com/ag-go/ag/core"
)

// MSELoss is mean((pred-target)^2) over all elements.
func MSELoss(pred, target *core.Tensor) *core.Tensor {
	if pred == nil || target == nil {
		panic("nn.MSELoss: nil pred or target")
	}
	if !slices.Equal(pred.Shape(), target.Shape()) {
		panic(fmt.Sprintf("nn.MSELoss: pred %v and target %v differ", pred.Shape(), target.Shape()))
	}
	var l *core.Tensor
	pred.Device().Composite("MSELoss", func() {
		d := core.Sub(pred, target)
		l = core.Mean(core.Mul(d, d))
	})
	return l
}

// CrossEntropy is -sum(target*log(pred))/batch for probabilities pred and
// target distributions of shape [batch, classes]. pred is clamped to
// [1e-7, 1] inside the log so a zero probability gives a finite loss.
func CrossEntropy(pred, target *core.Tensor) *core.Tensor {
	if pred == nil || target == nil {
		panic("nn.CrossEntropy: nil pred or target")
	}
	if pred.Rank() != 2 || !slices.Equal(pred.Shape(), target.Shape()) {
		panic(fmt.Sprintf("nn.CrossEntropy: pred %v and target %v must be the same [batch, classes]", pred.Shape(), target.Shape()))
	}
	var l *core.Tensor
	pred.Device().Composite("CrossEntropy", func() {
		ll := core.Mul(target, core.Log(core.Clamp(pred, 1e-7, 1)))
		l = core.Scale(core.Sum(ll), -1/float32(pred.Dim(0)))
	})
	return l
}

// SoftmaxCrossEntropy is the mean over the batch of -log softmax(logits)[label]
// for logits [batch, classes] and integer labels [batch] (0-based, as f32).
// Its gradient is (softmax - onehot)/batch, computed on the device.
//
// A label outside 0..classes-1 never counts as another class: labels given
// as host data fail the sync with an error naming the label (core.OneHot),
// and labels computed on the device make the loss NaN.
func SoftmaxCrossEntropy(logits, labels *core.Tensor) *core.Tensor {
	if logits == nil || labels == nil {
		panic("nn.SoftmaxCrossEntropy: nil logits or labels")
	}
	if logits.Rank() != 2 || labels.Rank() != 1 || labels.Dim(0) != logits.Dim(0) {
		panic(fmt.Sprintf("nn.SoftmaxCrossEntropy: logits %v, labels %v: want [batch, classes] and [batch]", logits.Shape(), labels.Shape()))
	}
	classes := logits.Dim(1)
	var loss *core.Tensor
	logits.Device().Composite("SoftmaxCrossEntropy", func() {
		oh := core.OneHot(labels, classes)
		// a select, not oh*logSoftmax: a -Inf logit of another class
		// (a masked one) must not make 0*(-Inf) = NaN
		ll := core.Where(oh, core.LogSoftmax(logits), logits.Device().Full(0))
		loss = core.Scale(core.Sum(ll), -1/float32(logits.Dim(0)))
		loss = core.Add(loss, labelPoison(labels, classes))
	})
	return loss
}

// labelPoison is a scalar that is (minus) zero when every label lies in
// 0..classes-1 and NaN otherwise (NaN labels included): sqrt(-s) with s the
// summed squared distance of the labels from that range. Added to a loss it
// makes device-side label errors visible instead of clamped.
func labelPoison(labels *core.Tensor, classes int) *core.Tensor {
	d := core.Sub(labels, core.Clamp(labels, 0, float32(classes-1)))
	return core.Sqrt(core.Neg(core.Sum(core.Mul(d, d))))
}
