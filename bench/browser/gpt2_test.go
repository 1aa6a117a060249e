package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nativeOut is the shape of examples/gpt2's output with -eval-every 1
// (app.RunArgs): the smoothed loss crosses the unigram entropy at step 3,
// the last step's metrics come on the "metrics:" line.
const nativeOut = `gpt2 on webgpu (lavapipe): size=tiny vocab=50257 bpe=8192 ctx=64 batch=4 lr=-1 warmup=-1 dropout=-1 seed=1 sample=0
tokenizer: 4526 tokens (learned from the text, at most 8192: no pair repeats past that); t.txt: 199991 bytes, 63719 tokens (0.3s)
unigram entropy of the training tokens: 5.5000 nats/token (the loss of a model that ignores the context)
step      1  loss 10.8000  900.00 ms/step  fixed-batch loss 10.8, smoothed loss 10.8, unigram entropy 5.5
step      2  loss 6.0000  10.00 ms/step  fixed-batch loss 7, smoothed loss 8.2, unigram entropy 5.5
step      3  loss 1.0000  20.00 ms/step  fixed-batch loss 5, smoothed loss 5.4, unigram entropy 5.5, step below unigram entropy 3
step      4  loss 1.0000  30.00 ms/step
metrics: fixed-batch loss 1.2, smoothed loss 4.1, step below unigram entropy 3, unigram entropy 5.5
`

func TestParseNative(t *testing.T) {
	n, err := parseNative(nativeOut, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Steps) != 4 || n.Unigram != 5.5 || n.Crossed != 3 || n.CrossedS != 0.93 {
		t.Errorf("%d steps, unigram %g, crossed at %d after %g s: want 4, 5.5, 3, 0.93", len(n.Steps), n.Unigram, n.Crossed, n.CrossedS)
	}
	// timed: steps 2 and 3 (one of warm-up, two timed); the rest 2..4
	if len(n.TimedMS) != 2 || n.MedianMS != 15 || n.RestMedianMS != 20 {
		t.Errorf("timed %v (median %g), rest median %g: want [10 20] (15) and 20", n.TimedMS, n.MedianMS, n.RestMedianMS)
	}
	if got := n.Steps[3].Metrics["smoothed loss"]; got != 4.1 {
		t.Errorf("the last step's smoothed loss %g, want 4.1 (from the metrics line)", got)
	}
	if _, err := parseNative(nativeOut, 4, 2); err == nil || !strings.Contains(err.Error(), "4 step lines") {
		t.Errorf("4 steps of warm-up of 4: %v, want an error", err)
	}
	// no crossing: none reported
	n, _ = parseNative(strings.ReplaceAll(nativeOut, ", step below unigram entropy 3", ""), 0, 4)
	if n.Crossed != 0 || n.CrossedS != 0 {
		t.Errorf("no crossing: crossed %d after %g s", n.Crossed, n.CrossedS)
	}
	var out bytes.Buffer
	rep := &GPT2Report{Config: gpt2Config{Size: "tiny", Ctx: 64, Batch: 4, BPE: 8192, TextName: "t.txt"}, PageError: "the page: boom", Native: n}
	printGPT2(&out, rep, Options{NativeDevice: "webgpu"})
	for _, want := range []string{"page: FAILED: the page: boom", "native (webgpu): median 25.00 ms/step over steps 1-4", "stayed above the unigram entropy for all 4 steps"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, out.String())
		}
	}
}

// TestGPT2Text: the handler serves -text at /text in the -gpt2 mode, and
// nothing there otherwise.
func TestGPT2Text(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "t.txt")
	if err := os.WriteFile(text, []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		code int
		body string
	}{{text, 200, "package main\n"}, {"", 404, ""}} {
		srv := httptest.NewServer(handler(dir, dir, c.text))
		resp, err := http.Get(srv.URL + "/text")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if resp.StatusCode != c.code || (c.code == 200 && string(b) != c.body) {
			t.Errorf("text %q: /text gave %d %q, want %d %q", c.text, resp.StatusCode, b, c.code, c.body)
		}
	}
}

// TestGPT2Refuses: bad settings are refused before anything starts,
// naming them.
func TestGPT2Refuses(t *testing.T) {
	base := Options{GPT2: "tiny", Ctx: 64, Batch: 4, Vocab: 50257, BPE: 8192, Steps: 10, NativeSteps: 300, NativeWarmup: 5, Text: "no-such.txt"}
	for _, c := range []struct {
		set  func(*Options)
		want string
	}{
		{func(o *Options) { o.Batch = 0 }, "-batch 0"},
		{func(o *Options) { o.BPE = 60000 }, "256 <= bpe <= vocab"},
		{func(o *Options) { o.Text = "" }, "-text FILE is missing"},
		{func(o *Options) {}, "no-such.txt"},
	} {
		o := base
		c.set(&o)
		if err := runGPT2(o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error saying %q", o, err, c.want)
		}
	}
}
