package models

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	_ "github.com/ag-go/ag/backend/all"
	"github.com/ag-go/ag/backend/backendtest/testenv"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
	"github.com/ag-go/ag/nn"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

// The character-level transformer at test size: 2 layers of width 64,
// causal attention, LayerNorm, dropout 0.1, AdamW with warm-up and a cosine
// schedule, gradient clipping, in a captured step. On cpu it trains
// charSteps steps and its loss (ln(vocab) = 3.9 at first) must fall below
// charLossGoal; another device (slower per small kernel: 400 steps take
// minutes on lavapipe) trains charCheckSteps steps and must follow cpu's
// losses step by step, dropout masks included (the random stream is the
// same on every backend).
const (
	charSteps      = 400
	charLossGoal   = 2.0 // mean training loss of the last 20 steps
	charCheckSteps = 20
	charLossTol    = 2e-3 // relative, per step, device vs cpu
)

// trainChar trains the test model for steps steps on dev, returning the losses.
func trainChar(t *testing.T, dev *core.Device, steps int) ([]float64, *GPT, *CharVocab) {
	if err := dev.Seed(1); err != nil {
		t.Fatal(err)
	}
	voc := NewCharVocab(KeeperText)
	toks, err := voc.Encode(KeeperText)
	if err != nil {
		t.Fatal(err)
	}
	cfg := GPTConfig{Vocab: voc.Size(), Context: 32, Dim: 64, Heads: 4, Layers: 2, Dropout: 0.1}
	m := NewGPT(dev, cfg, nn.NewRNG(1))
	const batch = 16
	data, err := NewBatches(toks, batch, cfg.Context, 2)
	if err != nil {
		t.Fatal(err)
	}
	opt := nn.WithSchedule(nn.NewAdamW(m.Params(), 3e-3, 0.01), nn.WarmupCosine(20, charSteps, 0.1))
	step := nn.CaptureStep(opt, func(in []*core.Tensor) *core.Tensor { return m.Loss(in[0], in[1]) })
	step.MaxGradNorm = 1
	var losses []float64
	for i := range steps {
		x, y := data.Next()
		l, err := step.Step(core.In(x, batch, cfg.Context), core.In(y, batch, cfg.Context))
		if err != nil {
			t.Fatalf("%s: step %d: %v", dev, i, err)
		}
		losses = append(losses, float64(l))
	}
	return losses, m, voc
}

func TestCharGPTTrains(t *testing.T) {
	dev := openDev(t)
	if dev.Name() != "cpu" {
		cpu, err := core.Open("cpu")
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		want, _, _ := trainChar(t, cpu, charCheckSteps)
		got, _, _ := trainChar(t, dev, charCheckSteps)
		for i := range want {
			if math.Abs(got[i]-want[i]) > charLossTol*want[i] {
				t.Fatalf("%s: step %d loss %.5f, cpu's %.5f (tolerance %g relative)", dev, i, got[i], want[i], charLossTol)
			}
		}
		t.Logf("%s: %d steps follow cpu's losses (%.4f -> %.4f)", dev, charCheckSteps, got[0], got[len(got)-1])
		return
	}
	losses, m, voc := trainChar(t, dev, charSteps)
	first, last := losses[0], 0.0
	for _, l := range losses[charSteps-20:] {
		last += l / 20
	}
	t.Logf("%s: loss %.3f -> %.3f over %d steps (vocab %d, ln = %.3f)", dev, first, last, charSteps, voc.Size(), math.Log(float64(voc.Size())))
	if math.Abs(first-math.Log(float64(voc.Size()))) > 0.3 {
		t.Errorf("first loss %.3f, want about ln(%d) = %.3f", first, voc.Size(), math.Log(float64(voc.Size())))
	}
	if !(last < charLossGoal) {
		t.Errorf("mean loss of the last 20 steps %.3f, want < %g", last, charLossGoal)
	}
	out, err := m.Generate(dev, must(voc.Encode("The keeper")), 40, 0.5, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sample: %q", voc.Decode(out))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Checkpointing the blocks changes the memory, not the numbers: the same
// loss and gradients (dropout included) with less memory planned.
func TestGPTCheckpoint(t *testing.T) {
	dev := openDev(t)
	cfg := GPTConfig{Vocab: 20, Context: 16, Dim: 32, Heads: 2, Layers: 3, Dropout: 0.1}
	data, err := NewBatches(make([]int, 64), 4, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	x, y := data.Next()
	var grads [2][]float32
	var est [2]core.MemoryEstimate
	for i, ck := range []bool{false, true} {
		cfg.Checkpoint = ck
		m := NewGPT(dev, cfg, nn.NewRNG(3))
		loss := func() *core.Tensor { return m.Loss(dev.Tensor(x, 4, 16), dev.Tensor(y, 4, 16)) }
		if est[i], err = dev.EstimateMemory(func() error { return loss().Backward() }); err != nil {
			t.Fatal(err)
		}
		if err := dev.Seed(5); err != nil {
			t.Fatal(err)
		}
		if err := loss().Backward(); err != nil {
			t.Fatal(err)
		}
		for _, p := range m.Params() {
			g, err := p.Grad().Data()
			if err != nil {
				t.Fatal(err)
			}
			grads[i] = append(grads[i], g...)
		}
	}
	for j := range grads[0] {
		if a, b := grads[0][j], grads[1][j]; math.Abs(float64(a-b)) > 1e-5*(1+math.Abs(float64(a))) {
			t.Fatalf("gradient %d: %g with checkpoints, %g without", j, b, a)
		}
	}
	t.Logf("without: %v\nwith:    %v", est[0], est[1])
	if est[1].Intermediates >= est[0].Intermediates*3/4 {
		t.Errorf("intermediates %d bytes with checkpoints, %d without: want less than 3/4", est[1].Intermediates, est[0].Intermediates)
	}
}

// Mixed precision: the test transformer trained with f16 (and bf16)
// matmuls, its activations stored in f16 (bf16) between forward and
// backward (core.Device.SetActivationStorage) and dynamic loss scaling
// follows its f32 training: the mean loss of the last steps within
// mixedLossTol. cpu trains mixedSteps steps,
// other devices mixedCheckSteps (each against its own f32 run).
const (
	mixedSteps      = 200
	mixedCheckSteps = 20
	mixedLossTol    = 0.05
)

func trainMixed(t *testing.T, dev *core.Device, prec core.Precision, steps int) []float64 {
	prev, err := dev.SetMatMulPrecision(prec)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.SetMatMulPrecision(prev)
	prevStore, err := dev.SetActivationStorage(prec)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.SetActivationStorage(prevStore)
	if err := dev.Seed(1); err != nil {
		t.Fatal(err)
	}
	voc := NewCharVocab(KeeperText)
	toks := must(voc.Encode(KeeperText))
	cfg := GPTConfig{Vocab: voc.Size(), Context: 32, Dim: 64, Heads: 4, Layers: 2, Dropout: 0.1}
	m := NewGPT(dev, cfg, nn.NewRNG(1))
	const batch = 16
	data := must(NewBatches(toks, batch, cfg.Context, 2))
	opt := nn.WithSchedule(nn.NewAdamW(m.Params(), 3e-3, 0.01), nn.WarmupCosine(20, mixedSteps, 0.1))
	scaler := nn.NewGradScaler(1024)
	var losses []float64
	for i := range steps {
		x, y := data.Next()
		opt.ZeroGrad()
		loss := m.Loss(dev.Tensor(x, batch, cfg.Context), dev.Tensor(y, batch, cfg.Context)).Keep()
		if err := scaler.Backward(loss); err != nil {
			t.Fatal(err)
		}
		if _, _, err := scaler.Step(opt, 1); err != nil {
			t.Fatalf("%v step %d: %v", prec, i, err)
		}
		l, err := loss.Item()
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, float64(l))
	}
	if scaler.Skipped > steps/10 {
		t.Errorf("%v: %d of %d steps skipped for overflow", prec, scaler.Skipped, steps)
	}
	return losses
}

func TestGPTMixedPrecision(t *testing.T) {
	dev := openDev(t)
	steps := mixedSteps
	if dev.Name() != "cpu" {
		steps = mixedCheckSteps
	}
	tail := func(l []float64) float64 {
		var s float64
		for _, v := range l[len(l)-10:] {
			s += v / 10
		}
		return s
	}
	ref := tail(trainMixed(t, dev, core.PrecisionF32, steps))
	for _, p := range []core.Precision{core.PrecisionF16, core.PrecisionBF16} {
		t.Run(p.String(), func(t *testing.T) {
			if p == core.PrecisionBF16 && dev.Name() == "ggml-vulkan" {
				// an error, not a silent f32 fallback, nor runs that fail later
				if _, err := dev.SetActivationStorage(p); err == nil || !strings.Contains(err.Error(), "unpack_bf16") {
					t.Errorf("SetActivationStorage(bf16) on ggml-vulkan: %v, want an error naming unpack_bf16", err)
				}
				if _, err := dev.SetMatMulPrecision(p); !errors.Is(err, core.ErrUnsupported) || !strings.Contains(err.Error(), "round_bf16") {
					t.Errorf("SetMatMulPrecision(bf16) on ggml-vulkan: %v, want an error wrapping core.ErrUnsupported naming round_bf16", err)
				}
				testenv.Skipf(t, "bf16 on ggml-vulkan: ggml-vulkan cannot convert bf16 back to f32 (round_bf16 and unpack_bf16 are in its Caps.Unsupported)")
			}
			got := tail(trainMixed(t, dev, p, steps))
			t.Logf("%s: mean loss of the last 10 of %d steps: f32 %.4f, %v %.4f", dev.Name(), steps, ref, p, got)
			if math.Abs(got-ref) > mixedLossTol {
				t.Errorf("%v: mean loss of the last 10 steps %.4f, f32's %.4f: want within %g", p, got, ref, mixedLossTol)
			}
		})
	}
}

// Misuse of GPT is a panic or an error naming the method and the values,
// never a runtime error or a token drawn from NaN logits.
func TestGPTMisuse(t *testing.T) {
	dev := openDev(t)
	m := NewGPT(dev, GPTConfig{Vocab: 5, Context: 4, Dim: 4, Heads: 2, Layers: 1}, rand.New(rand.NewPCG(1, 2)))
	for _, c := range []struct {
		name, want string
		f          func()
	}{
		{"Loss of nil tokens", "models.GPT.Loss: tokens", func() { m.Loss(nil, dev.Tensor([]float32{1, 2}, 1, 2)) }},
		{"Loss of nil targets", "models.GPT.Loss: tokens", func() { m.Loss(dev.Tensor([]float32{1, 2}, 1, 2), nil) }},
		{"Loss of other shapes", "models.GPT.Loss: targets [2 1]", func() {
			m.Loss(dev.Tensor([]float32{1, 2}, 1, 2), dev.Tensor([]float32{1, 2}, 2, 1))
		}},
	} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.Contains(s, c.want) {
					t.Errorf("%s: panic %q, want one containing %q", c.name, s, c.want)
				}
			}()
			c.f()
		}()
	}
	// a nil device or rng is an error, not a nil dereference; greedy
	// decoding draws nothing and needs no rng
	for _, c := range []struct {
		name string
		dev  *core.Device
		temp float64
		rng  *rand.Rand
		want string
	}{
		{"nil device", nil, 1, rand.New(rand.NewPCG(1, 2)), "models.GPT.Generate: nil device"},
		{"nil rng", dev, 0.5, nil, "models.GPT.Generate: nil rng at temperature 0.5"},
	} {
		if out, err := m.Generate(c.dev, []int{1, 2}, 2, c.temp, c.rng); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Generate with a %s: %v, %v; want an error containing %q", c.name, out, err, c.want)
		}
	}
	if out, err := m.Generate(dev, []int{1, 2}, 2, 0, nil); err != nil || len(out) != 4 {
		t.Errorf("greedy Generate without an rng: %v, %v; want 4 tokens", out, err)
	}
	// a diverged head: NaN logits are an error, not token 0
	nan := make([]float32, m.Head.B.Len())
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	if err := m.Head.B.WriteAt(0, nan); err != nil {
		t.Fatal(err)
	}
	for _, temp := range []float64{0, 1} {
		out, err := m.Generate(dev, []int{1, 2}, 3, temp, rand.New(rand.NewPCG(1, 2)))
		if err == nil || !strings.Contains(err.Error(), "models.GPT.Generate: logit 0 of token 2 is NaN") || len(out) != 2 {
			t.Errorf("Generate at temperature %g from NaN logits: %v, %v; want the prompt and an error naming the NaN", temp, out, err)
		}
	}
}
