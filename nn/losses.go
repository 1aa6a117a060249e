package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/ag-go/ag/core"
)

func sameShape(fn string, a, b *core.Tensor, an, bn string) {
	if a == nil || b == nil {
		panic(fmt.Sprintf("nn.%s: nil %s or %s", fn, an, bn))
	}
	if !slices.Equal(a.Shape(), b.Shape()) {
		panic(fmt.Sprintf("nn.%s: %s %v and %s %v differ", fn, an, a.Shape(), bn, b.Shape()))
	}
}

// BCEWithLogits is the mean binary cross-entropy of targets in [0, 1] and
// the probabilities sigmoid(logits), computed from the logits stably as
// softplus(x) - t*x (core.Softplus: no overflow for any x, finite for
// |x| up to f32's range); its gradient is (sigmoid(x) - t)/n. Prefer it to
// BCE of Sigmoid, which saturates.
func BCEWithLogits(logits, target *core.Tensor) *core.Tensor {
	sameShape("BCEWithLogits", logits, target, "logits", "target")
	var l *core.Tensor
	logits.Device().Composite("BCEWithLogits", func() {
		l = core.Mean(core.Sub(core.Softplus(logits), core.Mul(target, logits)))
	})
	return l
}

// BCE is the mean binary cross-entropy -(t*log(p) + (1-t)*log(1-p)) of
// probabilities p and targets t in [0, 1]. Each log is clamped below at
// -100, as PyTorch's, so p = 0 or 1 gives a finite loss (with no gradient
// through the clamped term).
func BCE(prob, target *core.Tensor) *core.Tensor {
	sameShape("BCE", prob, target, "prob", "target")
	var l *core.Tensor
	prob.Device().Composite("BCE", func() {
		lp := clampedLog(prob)
		lq := clampedLog(core.Affine(prob, -1, 1))
		ll := core.Add(core.Mul(target, lp), core.Mul(core.Affine(target, -1, 1), lq))
		l = core.Neg(core.Mean(ll))
	})
	return l
}

// clampedLog is max(log(x), -100) with no gradient where it is clamped,
// x = 0 included: there the log's own gradient 1/x would make the
// clamp's zero 0*Inf = NaN, so x = 0 takes log(1) - 100 instead.
func clampedLog(x *core.Tensor) *core.Tensor {
	zero := core.EqualScalar(x, 0)
	lx := core.Log(core.Where(zero, x.Device().Full(1), x))
	return core.Sub(core.Clamp(lx, -100, float32(math.Inf(1))), core.Scale(zero, 100))
}

// Huber is the mean Huber loss of pred - target: 0.5*d^2 where |d| <=
// delta, delta*(|d| - 0.5*delta) beyond (quadratic near 0, linear in the
// tails, so outliers pull with a bounded gradient delta), as PyTorch's
// HuberLoss. delta must be > 0.
func Huber(pred, target *core.Tensor, delta float32) *core.Tensor {
	sameShape("Huber", pred, target, "pred", "target")
	if !(delta > 0) || math.IsInf(float64(delta), 0) {
		panic(fmt.Sprintf("nn.Huber: delta %g, want a finite value > 0", delta))
	}
	var l *core.Tensor
	pred.Device().Composite("Huber", func() { l = core.Mean(huber(core.Sub(pred, target), delta)) })
	return l
}

// huber is the elementwise Huber function without a select: with a = |d|
// and c = min(a, delta), 0.5*c^2 + delta*(a - c).
func huber(d *core.Tensor, delta float32) *core.Tensor {
	a := core.Abs(d)
	c := core.Clamp(a, 0, delta)
	return core.Add(core.Scale(core.Mul(c, c), 0.5), core.Scale(core.Sub(a, c), delta))
}

// SmoothL1 is the mean smooth L1 loss of pred - target: 0.5*d^2/beta where
// |d| < beta, |d| - 0.5*beta beyond, as PyTorch's SmoothL1Loss (Huber/beta);
// beta 0 is the L1 loss mean(|d|).
func SmoothL1(pred, target *core.Tensor, beta float32) *core.Tensor {
	sameShape("SmoothL1", pred, target, "pred", "target")
	if !(beta >= 0) || math.IsInf(float64(beta), 0) {
		panic(fmt.Sprintf("nn.SmoothL1: beta %g, want a finite value >= 0", beta))
	}
	var l *core.Tensor
	pred.Device().Composite("SmoothL1", func() {
		d := core.Sub(pred, target)
		if beta == 0 {
			l = core.Mean(core.Abs(d))
			return
		}
		l = core.Scale(core.Mean(huber(d, beta)), 1/beta)
	})
	return l
}

// ClassOptions are the options of CrossEntropyLoss and NLLLoss; the zero
// value is the plain loss.
type ClassOptions struct {
	// LabelSmoothing in [0, 1) mixes the one-hot target with the uniform
	// distribution: q = (1-s)*onehot + s/classes, as PyTorch's
	// label_smoothing.
	LabelSmoothing float32
	// With Ignore set, rows whose label is IgnoreIndex (PyTorch uses -100)
	// add nothing to the loss or its gradient, and the mean is over the
	// other rows (NaN when every row is ignored, as PyTorch's).
	Ignore      bool
	IgnoreIndex int
}

// CrossEntropyLoss is the mean over the batch of -sum_c q_c*log
// softmax(logits)_c, q the (smoothed) one-hot target of each integer label,
// for logits [batch, classes] and labels [batch] (0-based whole numbers as
// f32): SoftmaxCrossEntropy with label smoothing and an ignored label (see
// ClassOptions). Labels outside 0..classes-1 (other than an ignored one)
// make the loss NaN.
func CrossEntropyLoss(logits, labels *core.Tensor, opt ClassOptions) *core.Tensor {
	checkClass("CrossEntropyLoss", logits, labels, opt)
	var l *core.Tensor
	logits.Device().Composite("CrossEntropyLoss", func() {
		if opt == (ClassOptions{}) {
			l = core.CrossEntropy(logits, labels) // one op of the IR (ggml fuses it)
			return
		}
		l = nll(core.LogSoftmax(logits), labels, opt)
	})
	return l
}

// NLLLoss is the negative log-likelihood of log-probabilities logProbs
// [batch, classes] (e.g. LogSoftmax's output) at integer labels [batch]:
// the mean over the (not ignored) rows of -logProbs[i, label_i], with the
// options of CrossEntropyLoss.
func NLLLoss(logProbs, labels *core.Tensor, opt ClassOptions) *core.Tensor {
	checkClass("NLLLoss", logProbs, labels, opt)
	var l *core.Tensor
	logProbs.Device().Composite("NLLLoss", func() { l = nll(logProbs, labels, opt) })
	return l
}

func checkClass(fn string, x, labels *core.Tensor, opt ClassOptions) {
	if x == nil || labels == nil {
		panic(fmt.Sprintf("nn.%s: nil input or labels", fn))
	}
	if x.Rank() != 2 || labels.Rank() != 1 || labels.Dim(0) != x.Dim(0) {
		panic(fmt.Sprintf("nn.%s: input %v, labels %v: want [batch, classes] and [batch]", fn, x.Shape(), labels.Shape()))
	}
	if s := opt.LabelSmoothing; !(s >= 0 && s < 1) {
		panic(fmt.Sprintf("nn.%s: label smoothing %g, want a value in [0, 1)", fn, s))
	}
	if opt.Ignore && math.Abs(float64(opt.IgnoreIndex)) >= 1<<24 {
		panic(fmt.Sprintf("nn.%s: ignore index %d is not exact in f32", fn, opt.IgnoreIndex))
	}
}

// nll is the mean over kept rows of -sum_c q_c*lp_c.
func nll(lp, labels *core.Tensor, opt ClassOptions) *core.Tensor {
	batch, classes := lp.Dim(0), lp.Dim(1)
	var keep *core.Tensor // [batch, 1]: 1 for counted rows, 0 for ignored ones
	if opt.Ignore {
		// min(|label - ignore|, 1) is 1 unless label == ignore, for whole
		// numbers; an ignored label becomes 0 before OneHot, so it is valid.
		keep = core.Clamp(core.Abs(core.AddScalar(labels, -float32(opt.IgnoreIndex))), 0, 1)
		labels = core.Mul(labels, keep)
		keep = core.Reshape(keep, batch, 1)
	}
	q := core.OneHot(labels, classes)
	zero := lp.Device().Full(0)
	var ll *core.Tensor
	if s := opt.LabelSmoothing; s > 0 {
		ll = core.Mul(core.Affine(q, 1-s, s/float32(classes)), lp)
	} else {
		ll = core.Where(q, lp, zero) // not q*lp: a -Inf log-probability of another class is no 0*Inf = NaN
	}
	if keep != nil {
		ll = core.Where(keep, ll, zero) // an ignored row adds nothing, even -Inf or NaN
	}
	var loss *core.Tensor
	if keep != nil {
		loss = core.Neg(core.Div(core.Sum(ll), core.Sum(keep)))
	} else {
		loss = core.Scale(core.Sum(ll), -1/float32(batch))
	}
	return core.Add(loss, labelPoison(labels, classes))
}
