package web_test

// GPT-2 in the page (examples/gpt2): a text file given to the page's
// picker, the tokenizer and the tiny size trained in the tab on the
// pure-Go backend compiled to wasm, the checkpoint downloaded, loaded
// natively and measured to the page's number, uploaded back, and a size
// too large for the page refused before it is built.

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
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
	// page's loss on the same batch (the pure-Go backend, native and wasm)
	if got := nativeFixedLoss(t, data, vocab, ctx, batch); math.Abs(got-a) > 1e-3*math.Max(1, a) {
		t.Errorf("downloaded checkpoint loaded natively: fixed-batch loss %.6f, the page's %.6f", got, a)
	} else {
		t.Logf("checkpoint of %d bytes: fixed-batch loss %.6f natively, %.6f in the page", len(data), got, a)
	}

	// uploaded back into a fresh model of the same form: the same loss
	tb.do(t, chromedp.SetValue(chromedp.CSS("#p-seed"), "5"), chromedp.SetUploadFiles(chromedp.CSS("#f-load"), []string{ckpt}))
	tb.wait(t, `document.body.dataset.loaded === "gpt2-step40.safetensors"`, 60*time.Second)
	if m := eval[string](t, tb, `document.body.dataset.metrics`); !strings.Contains(m, strconv.FormatFloat(a, 'g', -1, 64)) {
		t.Errorf("after uploading the checkpoint into a model of seed 5: the page's metrics %s, want the fixed-batch loss %g", m, a)
	}

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

// nativeFixedLoss loads a checkpoint the page saved (GPT-2's keys, the
// tokenizer in its metadata) into a tiny models.GPT2 on the native cpu
// backend and returns its loss on the batch the page's Eval measures
// (examples/gpt2's FixedBatch: the text's first batch*ctx tokens, end to
// end), dropout off.
func nativeFixedLoss(t *testing.T, data []byte, vocab, ctx, batch int) float64 {
	t.Helper()
	f, err := safetensors.Read(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := bpe.Read(strings.NewReader(f.Metadata["ag.bpe.vocab.json"]), strings.NewReader(f.Metadata["ag.bpe.merges.txt"]))
	if err != nil {
		t.Fatalf("the checkpoint's tokenizer: %v", err)
	}
	dev, err := core.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	cfg := models.GPT2Sizes["tiny"]
	cfg.Vocab = vocab
	g := models.NewGPT2(dev, cfg, nn.NewRNG(99))
	if _, err := models.LoadGPT2Safetensors(bytes.NewReader(data), g); err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode([]byte(models.KeeperText))
	x, y := make([]float32, batch*ctx), make([]float32, batch*ctx)
	n := len(ids) - 1
	for i := range x {
		x[i], y[i] = float32(ids[i%n]), float32(ids[i%n+1])
	}
	g.SetTraining(false)
	var l float32
	dev.NoGrad(func() { l, err = g.Loss(dev.Tensor(x, batch, ctx), dev.Tensor(y, batch, ctx)).Item() })
	if err != nil {
		t.Fatal(err)
	}
	return float64(l)
}
