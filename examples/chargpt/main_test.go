package main

import (
	"math"
	"strings"
	"testing"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

// testConfig is the test size: one block of width 32, so that 150 steps
// take a few seconds on cpu and lavapipe.
func testConfig() app.Config {
	cfg := app.Config{}
	for _, p := range Spec.Params {
		cfg[p.Name] = p.Default
	}
	cfg["layers"], cfg["dim"], cfg["heads"], cfg["context"], cfg["batch"] = 1, 32, 2, 16, 8
	return cfg
}

// The transformer starts near ln(vocab) on held-out text; 150 steps must
// take the held-out loss below 2.9 (ln 51 = 3.93) and the training loss
// (mean of 10 steps) down by 0.8 or more, and the sample must start with
// the prompt and hold text of the vocabulary.
func TestCharGPTLearns(t *testing.T) {
	dev := openDev(t)
	m, err := New(dev, testConfig())
	if err != nil {
		t.Fatal(err)
	}
	v0, err := m.ValLoss()
	if err != nil {
		t.Fatal(err)
	}
	ln := math.Log(float64(m.voc.Size()))
	if math.Abs(v0-ln) > 0.3 {
		t.Fatalf("untrained held-out loss %.3f: want about ln(%d) = %.3f", v0, m.voc.Size(), ln)
	}
	const steps = 150
	var first, last float64
	for i := range steps {
		l, err := m.Step()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if i < 10 {
			first += float64(l) / 10
		} else if i >= steps-10 {
			last += float64(l) / 10
		}
	}
	v1, err := m.ValLoss()
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Sample()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: training loss %.3f -> %.3f, held-out %.3f -> %.3f; sample %q", dev, first, last, v0, v1, s)
	if !(last < first-0.8) {
		t.Errorf("training loss %.3f -> %.3f: want it 0.8 lower or more", first, last)
	}
	if !(v1 < 2.9) {
		t.Errorf("held-out loss %.3f after %d steps: want < 2.9", v1, steps)
	}
	if !strings.HasPrefix(s, Prompt) || len(s) != len(Prompt)+120 {
		t.Errorf("sample %q: want %q and 120 characters more", s, Prompt)
	}
}

// dim must be a multiple of heads: Build says so instead of panicking.
func TestCharGPTBadHeads(t *testing.T) {
	dev := openDev(t)
	cfg := testConfig()
	cfg["heads"] = 3
	if _, err := New(dev, cfg); err == nil || !strings.Contains(err.Error(), "multiple of heads") {
		t.Fatalf("dim 32, heads 3: error %v, want one naming the multiple", err)
	}
}
