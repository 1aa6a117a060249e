package web_test

// GPT-2 in the page (examples/gpt2): a text file given to the page's
// picker, the tokenizer and the tiny size trained in the tab on the
// pure-Go backend compiled to wasm, the checkpoint downloaded, loaded
// natively and measured to the page's loss and logits, uploaded back, a
// checkpoint made natively uploaded to the page's logits, and a size too
// large for the page refused before it is built.

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/chromedp"

	"github.com/ag-go/ag/bpe"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/models"
	"github.com/ag-go/ag/nn"
	"github.com/ag-go/ag/safetensors"
)

func TestExampleGPT2(t *testing.T) {
	t0 := time.Now()
	tb := openApp(t, "gpt2")
	dir := t.TempDir()
	textPath := filepath.Join(dir, "story.txt")
	if err := os.WriteFile(textPath, []byte(models.KeeperText), 0o644); err != nil {
		t.Fatal(err)
	}
	tb.do(t, chromedp.SetUploadFiles(chromedp.CSS("#file-text"), []string{textPath}))
	tb.wait(t, `document.body.dataset.file_text === "story.txt"`, 20*time.Second)

	// tiny (2x64) with a BPE of 300 tokens learned in the tab
	const vocab, ctx, batch = 300, 16, 4
	params := map[string]string{"size": "tiny", "vocab": "300", "ctx": "16", "batch": "4", "sample": "12", "lr": "0.003"}
	before, after, first, last := trainApp(t, tb, "cpu", params, 40, 120*time.Second)
	b, a := before["fixed-batch loss"], after["fixed-batch loss"]
	if !(math.Abs(b-math.Log(vocab)) < 0.5 && a < b-0.3 && last < first) {
		t.Errorf("fixed-batch loss %g -> %g, training loss %g -> %g: want about ln(300) = 5.7 at first, then 0.3 lower", b, a, first, last)
	}
	tiny := models.GPT2Sizes["tiny"]
	tiny.Vocab = vocab
	desc := eval[string](t, tb, `document.querySelector("#model-desc").textContent`)
	for _, want := range []string{"tokenizer: 300 tokens", "story.txt: 8635 bytes", "gpt2 tiny on", "parameters: " + strconv.Itoa(tiny.Params())} {
		if !strings.Contains(desc, want) {
			t.Errorf("model description lacks %q: %s", want, desc)
		}
	}
	// 40 steps: no sample on the way (a train of 50 or more shows 3)
	if n := eval[string](t, tb, `document.body.dataset.samples`); n != "1" {
		t.Errorf("%s samples after 40 steps, want 1", n)
	}
	if s := eval[string](t, tb, `document.querySelector("#sample").textContent`); !strings.HasPrefix(s, "The") {
		t.Errorf("sample %q: want the prompt continued", s)
	}

	// the checkpoint: downloaded by its button
	tb.do(t, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		on := true
		_, err := cdp.Call(ctx, tg, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir, EventsEnabled: &on})
		return err
	}), chromedp.Click(chromedp.CSS("#btn-save")))
	tb.wait(t, `document.body.dataset.saved`, 30*time.Second)
	saved := eval[string](t, tb, `document.body.dataset.saved`)
	ckpt := filepath.Join(dir, "gpt2-step40.safetensors")
	var data []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		var err error
		if data, err = os.ReadFile(ckpt); err == nil && saved == strconv.Itoa(len(data)) {
			break
		}
		if time.Now().After(deadline) {
			ls, _ := os.ReadDir(dir)
			t.Fatalf("no download %s of %s bytes (%v, %d bytes); folder: %v; page %s", ckpt, saved, err, len(data), ls, eval[string](t, tb, `location.href + " " + typeof ag`))
		}
		time.Sleep(100 * time.Millisecond)
	}

	// natively: the file's tokenizer and weights into models.GPT2 give the
	// page's loss on the same batch and the page's logits of the text's
	// first 16 tokens, each of them (the pure-Go backend, native and wasm)
	dev, err := core.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	g, ids := nativeGPT2(t, dev, data, vocab)
	if got := nativeFixedLoss(t, dev, g, ids, ctx, batch); math.Abs(got-a) > 1e-3*math.Max(1, a) {
		t.Errorf("downloaded checkpoint loaded natively: fixed-batch loss %.6f, the page's %.6f", got, a)
	} else {
		t.Logf("checkpoint of %d bytes: fixed-batch loss %.6f natively, %.6f in the page", len(data), got, a)
	}
	trained := pageOutputs(t, tb)
	sameLogits(t, "page -> file -> native", trained, nativeLogits(t, dev, g, ids, ctx))

	// uploaded back into a fresh model of the same form: the same loss
	tb.do(t, chromedp.SetValue(chromedp.CSS("#p-seed"), "5"), chromedp.SetUploadFiles(chromedp.CSS("#f-load"), []string{ckpt}))
	tb.wait(t, `document.body.dataset.loaded === "gpt2-step40.safetensors"`, 60*time.Second)
	if m := eval[string](t, tb, `document.body.dataset.metrics`); !strings.Contains(m, strconv.FormatFloat(a, 'g', -1, 64)) {
		t.Errorf("after uploading the checkpoint into a model of seed 5: the page's metrics %s, want the fixed-batch loss %g", m, a)
	}
	if got := pageOutputs(t, tb); !slices.Equal(got, trained) {
		t.Errorf("after uploading the checkpoint into a model of seed 5: the page's logits differ from the trained model's")
	}

	// the other way: a model made natively (seed 7, untrained), saved with
	// the page's tokenizer and uploaded, gives the page the native logits
	other := models.NewGPT2(dev, g.Config, nn.NewRNG(7))
	other.SetTraining(false)
	f, err := safetensors.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	nativePath := filepath.Join(dir, "native.safetensors")
	var nb bytes.Buffer
	if err := nn.SaveSafetensors(&nb, other, nn.SaveOptions{Metadata: f.Metadata}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(nativePath, nb.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tb.do(t, chromedp.SetUploadFiles(chromedp.CSS("#f-load"), []string{nativePath}))
	tb.wait(t, `document.body.dataset.loaded === "native.safetensors"`, 60*time.Second)
	sameLogits(t, "native -> file -> page", pageOutputs(t, tb), nativeLogits(t, dev, other, ids, ctx))

	// the measured profile of the step (a captured step: one mode)
	tb.do(t, chromedp.SetValue(chromedp.CSS("#f-psteps"), "2"), chromedp.Click(chromedp.CSS("#btn-profile")))
	tb.wait(t, `document.body.dataset.profiled`, 60*time.Second)
	checkBars(t, tb, []string{"step"})
	if ops := eval[[]string](t, tb, `[...document.querySelectorAll("#op-table tbody tr")].map(r => r.textContent)`); !strings.Contains(strings.Join(ops, " "), "MatMul") {
		t.Errorf("per-op table of the step: %q, want MatMul among them", ops)
	}

	// a size past the page's memory is refused before it is built, naming
	// the size that fits
	tb.do(t, chromedp.SetValue(chromedp.CSS("#p-size"), "1558M"), chromedp.SetValue(chromedp.CSS("#p-vocab"), "50257"),
		chromedp.SetValue(chromedp.CSS("#p-batch"), "8"), chromedp.Click(chromedp.CSS("#btn-train")))
	tb.wait(t, `document.querySelector("#status").textContent.includes("fails") || document.querySelector("#status").textContent.includes("failed")`, 30*time.Second)
	status := eval[string](t, tb, `document.querySelector("#status").textContent`)
	for _, want := range []string{"size 1558M (vocab 50257) at batch 8, ctx 16 needs about", "the largest size that fits at batch 8 is"} {
		if !strings.Contains(status, want) {
			t.Errorf("1558M in the page: status %q lacks %q", status, want)
		}
	}
	tb.screenshot(t, "example-gpt2.png")
	// the refusal is an error banner by design; nothing else may be
	tb.mu.Lock()
	var others []string
	for _, e := range tb.errors {
		if !strings.Contains(e, "needs about") {
			others = append(others, e)
		}
	}
	tb.mu.Unlock()
	if len(others) > 0 {
		t.Errorf("console errors: %v", others)
	}
	t.Logf("page test wall time %.1f s", time.Since(t0).Seconds())
}

// nativeGPT2 loads a checkpoint the page saved (GPT-2's keys, the
// tokenizer in its metadata) into a tiny models.GPT2 on the native cpu
// backend, dropout off, and returns it with the text's tokens under the
// checkpoint's tokenizer.
func nativeGPT2(t *testing.T, dev *core.Device, data []byte, vocab int) (*models.GPT2, []int) {
	t.Helper()
	f, err := safetensors.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := bpe.Read(strings.NewReader(f.Metadata["ag.bpe.vocab.json"]), strings.NewReader(f.Metadata["ag.bpe.merges.txt"]))
	if err != nil {
		t.Fatalf("the checkpoint's tokenizer: %v", err)
	}
	cfg := models.GPT2Sizes["tiny"]
	cfg.Vocab = vocab
	g := models.NewGPT2(dev, cfg, nn.NewRNG(99))
	if _, err := models.LoadGPT2Safetensors(bytes.NewReader(data), g); err != nil {
		t.Fatal(err)
	}
	g.SetTraining(false)
	return g, tok.Encode([]byte(models.KeeperText))
}

// nativeFixedLoss is g's loss on the batch the page's Eval measures
// (examples/gpt2's FixedBatch: the text's first batch*ctx tokens, end to
// end).
func nativeFixedLoss(t *testing.T, dev *core.Device, g *models.GPT2, ids []int, ctx, batch int) float64 {
	t.Helper()
	x, y := make([]float32, batch*ctx), make([]float32, batch*ctx)
	n := len(ids) - 1
	for i := range x {
		x[i], y[i] = float32(ids[i%n]), float32(ids[i%n+1])
	}
	var l float32
	var err error
	dev.NoGrad(func() { l, err = g.Loss(dev.Tensor(x, batch, ctx), dev.Tensor(y, batch, ctx)).Item() })
	if err != nil {
		t.Fatal(err)
	}
	return float64(l)
}

// nativeLogits are g's logits of the text's first n tokens, what the
// page's ag.outputs() gives (examples/gpt2's Outputs).
func nativeLogits(t *testing.T, dev *core.Device, g *models.GPT2, ids []int, n int) []float32 {
	t.Helper()
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(ids[i])
	}
	var out []float32
	var err error
	dev.NoGrad(func() { out, err = g.Forward(dev.Tensor(x, 1, n)).Data() })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pageOutputs reads the page's ag.outputs() (each value a float32,
// exactly, through JSON).
func pageOutputs(t *testing.T, tb *tab) []float32 {
	t.Helper()
	v := eval[[]float64](t, tb, `ag.outputs()`)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// sameLogits checks the page's logits against native ones, each within
// f32 tolerance (the wasm build's sums run in another order than the
// native kernels'), and that they are not all alike (a model that learned
// nothing would pass).
func sameLogits(t *testing.T, what string, page, native []float32) {
	t.Helper()
	if len(page) != len(native) || len(page) == 0 {
		t.Errorf("%s: %d logits in the page, %d natively", what, len(page), len(native))
		return
	}
	worst, spread := 0.0, 0.0
	for i := range page {
		d := math.Abs(float64(page[i]-native[i])) / math.Max(1, math.Abs(float64(native[i])))
		if d > 2e-5 { // 20x the worst seen (1e-6)
			t.Errorf("%s: logit %d (position %d, token %d) %g in the page, %g natively", what, i, i/300, i%300, page[i], native[i])
			return
		}
		worst = max(worst, d)
		spread = max(spread, math.Abs(float64(native[i]-native[0])))
	}
	if spread < 0.1 {
		t.Errorf("%s: the logits span %g: too alike to compare", what, spread)
	}
	t.Logf("%s: %d logits agree, worst relative difference %.2g", what, len(page), worst)
}
