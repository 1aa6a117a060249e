package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

// losses returns the losses of the "step" lines of out.
func losses(t *testing.T, out string) []float64 {
	t.Helper()
	var ls []float64
	for _, m := range regexp.MustCompile(`(?m)^step \d+/\d+  loss (\S+)`).FindAllStringSubmatch(out, -1) {
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
		{[]string{"-size", "2M"}, `no size "2M"`},
		{[]string{"-ctx", "4096"}, "-ctx 4096"},
		{[]string{"-vocab-json", "x.json"}, "give both or neither"},
		{[]string{"-vocab", "100"}, "size 100"},
		{[]string{"-bogus"}, "bogus"},
	} {
		out.Reset()
		err := run(append([]string{"-device", "cpu", "-text", text, "-steps", "1"}, c.args...), &out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
