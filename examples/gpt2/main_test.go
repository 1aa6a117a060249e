//go:build !js

package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
	"github.com/ag-go/ag/models"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

// losses returns the losses of the "step" lines of out: Train's "step
// i/n  loss L" and the command line's (app.RunArgs) "step i  loss L".
func losses(t *testing.T, out string) []float64 {
	t.Helper()
	var ls []float64
	for _, m := range regexp.MustCompile(`(?m)^step +\d+(?:/\d+)?  loss (\S+)`).FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, v)
	}
	return ls
}

// TestTrainTiny trains the tiny size on models.KeeperText with a BPE of at
// most 1000 tokens learned from it: the first loss is about ln(1000), the
// last at least 1.5 lower; the samples and the saved files are there, and
// the saved model and tokenizer load back (-load, -vocab-json, -merges)
// to the loss the run ended near.
func TestTrainTiny(t *testing.T) {
	dev := openDev(t)
	dir := t.TempDir()
	save := filepath.Join(dir, "tiny.safetensors")
	var out bytes.Buffer
	o := Options{Size: "tiny", Vocab: 1000, Ctx: 32, Batch: 8, Steps: 80, LR: 3e-3, Dropout: 0, Seed: 1, Sample: 20, Prompt: "The keeper", Save: save}
	if err := Train(dev, o, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	t.Log(out.String())
	for _, want := range []string{"parameters: 172288", "tokenizer: 737 tokens", "sample 1:\nThe keeper", "sample 2:\nThe keeper", "saved " + save} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	ls := losses(t, out.String())
	if len(ls) < 5 {
		t.Fatalf("%d loss lines", len(ls))
	}
	if math.Abs(ls[0]-math.Log(1000)) > 0.5 || !(ls[len(ls)-1] < ls[0]-1.5) {
		t.Errorf("losses %v: want the first about ln(1000) = 6.9 and the last 1.5 lower", ls)
	}
	base := strings.TrimSuffix(save, ".safetensors")
	for _, f := range []string{save, base + "-vocab.json", base + "-merges.txt"} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	// One more step from the saved model, with the saved tokenizer, at a
	// tiny learning rate: near the last loss, far below the untrained one.
	out.Reset()
	o2 := Options{Size: "tiny", Vocab: 1000, VocabJSON: base + "-vocab.json", Merges: base + "-merges.txt", Load: save,
		Ctx: 32, Batch: 8, Steps: 1, LR: 1e-9, Dropout: 0, Seed: 2, Prompt: "The"}
	if err := Train(dev, o2, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if l := losses(t, out.String()); len(l) != 1 || l[0] > ls[len(ls)-1]+0.7 {
		t.Errorf("loaded model's loss %v, the run ended at %.3f\n%s", l, ls[len(ls)-1], out.String())
	}
}

// TestFlags runs the command line on cpu (two steps of the tiny size), and
// refuses bad flags saying which.
func TestFlags(t *testing.T) {
	text := filepath.Join(t.TempDir(), "t.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("a small text, a small test; ", 40)), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run([]string{"-device", "cpu", "-text", text, "-size", "tiny", "-steps", "2", "-ctx", "16", "-batch", "2", "-sample", "5"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "parameters: 3") || len(losses(t, out.String())) != 2 {
		t.Errorf("output:\n%s", out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-size", "2M"}, `-size "2M": want one of tiny, mini, 124M`},
		{[]string{"-ctx", "4096"}, "-ctx 4096"},
		{[]string{"-vocab-json", text}, "give both or neither"},
		{[]string{"-vocab-json", "no-such.json"}, "no-such.json"},
		{[]string{"-vocab", "100"}, "size 100"},
		{[]string{"-bogus"}, "bogus"},
		{[]string{"-text", empty}, "the file is empty"}, // not the shipped story in its place
	} {
		out.Reset()
		err := run(append([]string{"-device", "cpu", "-text", text, "-steps", "1"}, c.args...), &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}

// TestFits: a size over the budget is refused before anything is
// allocated, naming what it needs and the sizes that fit; one buffer over
// the device's largest is refused too (not the logits: they are computed
// in chunks that fit); tiny fits.
func TestFits(t *testing.T) {
	c := models.GPT2Sizes["124M"]
	err := checkFits("124M", c, 8, 64, budget{Bytes: 2 << 30, Where: "the page's wasm memory"})
	for _, want := range []string{"size 124M (vocab 50257) at batch 8, ctx 64 needs about 2.", "over the page's wasm memory (2.0 GiB)", "the largest size that fits at batch 8 is mini (ctx 64)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("124M in 2 GiB: %v, want it to say %q", err, want)
		}
	}
	err = checkFits("124M", c, 8, 64, budget{Bytes: 1 << 40, Elems: 1 << 24})
	if err == nil || !strings.Contains(err.Error(), "needs a buffer of 38597376 floats, over the 16777216") {
		t.Errorf("124M with buffers of 2^24 floats: %v, want the embedding's buffer refused", err)
	}
	// the logits of 124M at batch 4, ctx 1024 (206M floats) over a largest
	// buffer of 64M floats: GPT2.Loss computes them in chunks of 1335 rows
	if err := checkFits("124M", c, 4, 1024, budget{Bytes: 80 << 30, Elems: 1 << 26}); err != nil {
		t.Errorf("124M at batch 4, ctx 1024 with 80 GiB and buffers of 2^26 floats: %v", err)
	}
	if total, largest := stepFloats(c, 4, 1024, 1<<26); largest != 1335*50257 || total > 12<<30/4 {
		t.Errorf("124M at batch 4, ctx 1024 in chunks: %d floats in all, %d in the largest buffer; want under 12 GiB of floats and a chunk's logits, 1335 rows of 50257", total, largest)
	}
	if err := checkFits("124M", c, 4, 1024, budget{Bytes: 8 << 30, Elems: 1 << 26}); err == nil || !strings.Contains(err.Error(), "needs about 1") {
		t.Errorf("124M at batch 4, ctx 1024 in 8 GiB: %v, want it refused for its memory", err)
	}
	if err := checkFits("tiny", models.GPT2Sizes["tiny"], 8, 64, budget{Bytes: 2 << 30, Elems: 1 << 26}); err != nil {
		t.Errorf("tiny: %v", err)
	}
	// Spec's build refuses it the same way, before allocating (where the
	// device knows its memory: a hardware WebGPU adapter does not).
	dev := openDev(t)
	if deviceBudget(dev).Bytes == 0 {
		t.Logf("%s reports no memory: New's refusal of 1558M not tried", dev.Name())
		return
	}
	_, err = New(dev, Options{Size: "1558M", Vocab: 50257, Ctx: 1024, Batch: 4096, LR: 1e-3, Seed: 1})
	if err == nil || !strings.Contains(err.Error(), "size 1558M (vocab 50257) at batch 4096, ctx 1024 needs about") {
		t.Errorf("1558M at batch 4096: %v", err)
	}
}

// TestCheckpoint: the command line's -save writes a file that -load reads
// back into the same fixed-batch loss (one step at lr 0 changes nothing),
// the tokenizer coming from the file's metadata.
func TestCheckpoint(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "c.safetensors")
	args := []string{"-device", "cpu", "-ctx", "16", "-batch", "2", "-vocab", "300", "-sample", "5"}
	var out bytes.Buffer
	if err := run(append(args, "-steps", "5", "-save", ckpt), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	fixed := regexp.MustCompile(`metrics: fixed-batch loss (\S+)`)
	a := fixed.FindStringSubmatch(out.String())
	out.Reset()
	if err := run(append(args, "-steps", "1", "-lr", "0", "-seed", "7", "-load", ckpt), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	b := fixed.FindStringSubmatch(out.String())
	if a == nil || b == nil || a[1] != b[1] || !strings.Contains(out.String(), "loaded "+ckpt) {
		t.Errorf("fixed-batch loss saved %v, loaded %v: want the same\n%s", a, b, out.String())
	}
}

// TestOutputs: the page's ag.outputs (app.Outputter) are the logits of the
// fixed batch's first 16 tokens, and a checkpoint saved and loaded into a
// model of another seed gives them back bit for bit.
func TestOutputs(t *testing.T) {
	var _ app.Outputter = (*Model)(nil)
	dev := openDev(t)
	o := Options{Size: "tiny", Vocab: 300, Ctx: 24, Batch: 2, LR: 1e-3, Seed: 1}
	m, err := New(dev, o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 16*300 {
		t.Fatalf("%d outputs, want 16 positions of 300 logits", len(want))
	}
	var buf bytes.Buffer
	if err := m.Save(&buf); err != nil {
		t.Fatal(err)
	}
	o.Seed = 2
	m2, err := New(dev, o)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := m2.Outputs(); slices.Equal(got, want) {
		t.Fatal("seed 2 gives seed 1's outputs: the comparison below shows nothing")
	}
	if err := m2.Load(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := m2.Outputs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("outputs after the checkpoint's round trip differ: %v... want %v...", got[:4], want[:4])
	}
}

// TestUnigramEntropy: uniform over k tokens is ln k nats; one token
// repeated, 0; frequencies 1/2, 1/4, 1/4 give 1.5 ln 2.
func TestUnigramEntropy(t *testing.T) {
	for _, c := range []struct {
		ids  []int
		want float64
	}{
		{[]int{0, 1, 2, 3, 4}, math.Log(5)},
		{[]int{7, 7, 7}, 0},
		{[]int{1, 1, 2, 3}, 1.5 * math.Log(2)},
	} {
		if got := UnigramEntropy(c.ids); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("UnigramEntropy(%v) = %g, want %g", c.ids, got, c.want)
		}
	}
}

// TestUnigramCrossing trains the tiny size with the size's learning rate
// and warm-up (Options' -1s) on models.KeeperText until its smoothed loss
// falls below the unigram entropy of the text's tokens - within 300 steps
// - and checks that Eval and Train report the step. (On 4 MB of Go source,
// the command's defaults crossed at step 137 of tiny on the cpu.)
func TestUnigramCrossing(t *testing.T) {
	dev := openDev(t)
	o := Options{Size: "tiny", Vocab: 512, BPE: 512, Ctx: 32, Batch: 8, LR: -1, Warmup: -1, Dropout: -1, Seed: 1}
	m, err := New(dev, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := UnigramEntropy(m.ids); m.unigram != want || !strings.Contains(m.Built(), fmt.Sprintf("unigram entropy of the training tokens: %.4f nats/token", want)) {
		t.Errorf("unigram entropy %g, want %g, in Built:\n%s", m.unigram, want, m.Built())
	}
	if !strings.Contains(m.Built(), "AdamW: lr 0.001 after 20 steps of warm-up") {
		t.Errorf("Built does not name tiny's lr and warm-up:\n%s", m.Built())
	}
	var first float32
	for i := 1; i <= 300 && m.crossed == 0; i++ {
		l, err := m.Step()
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			first = l
		}
	}
	if !(float64(first) > m.unigram+1) {
		t.Fatalf("first loss %g, unigram entropy %g: want the untrained model well above it (the test shows nothing otherwise)", first, m.unigram)
	}
	if m.crossed == 0 {
		t.Fatalf("the smoothed loss %g did not fall below the unigram entropy %g in 300 steps", m.smoothed(), m.unigram)
	}
	t.Logf("unigram entropy %.4f: the smoothed loss crossed it at step %d (first loss %.4f)", m.unigram, m.crossed, first)
	mets, err := m.Eval()
	if err != nil {
		t.Fatal(err)
	}
	if mets["step below unigram entropy"] != float64(m.crossed) || !(mets["smoothed loss"] < m.unigram) || mets["unigram entropy"] != m.unigram {
		t.Errorf("metrics %v: want the crossing step %d, the smoothed loss below the entropy %g", mets, m.crossed, m.unigram)
	}
	// Train says it on the step it happens
	var out bytes.Buffer
	o.Steps = m.crossed
	if err := Train(dev, o, &out); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("step %d: the smoothed training loss", m.crossed); !strings.Contains(out.String(), want) {
		t.Errorf("Train's output lacks %q:\n%s", want, out.String())
	}
}

// TestSizeDefaults: every size has its learning rate and warm-up, and
// 124M's are GPT-3's (6e-4) after 50 steps.
func TestSizeDefaults(t *testing.T) {
	for name := range models.GPT2Sizes {
		if _, ok := sizeLR[name]; !ok {
			t.Errorf("size %s has no sizeLR", name)
		}
		if _, ok := sizeWarmup[name]; !ok {
			t.Errorf("size %s has no sizeWarmup", name)
		}
	}
	if sizeLR["124M"] != 6e-4 || sizeWarmup["124M"] != 50 {
		t.Errorf("124M: lr %g, warm-up %d: want 6e-4 and 50", sizeLR["124M"], sizeWarmup["124M"])
	}
}
