package main

import (
	"math/rand/v2"
	"testing"

	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/testdev"
)

func openDev(t testing.TB) *core.Device { return testdev.Open(t) }

// A random policy keeps the pole up about 22 steps: the yardstick the
// agent must beat.
func TestCartPoleRandom(t *testing.T) {
	env := NewCartPole(500, rand.New(rand.NewPCG(1, 2)))
	rng := rand.New(rand.NewPCG(3, 4))
	total := 0
	const n = 500
	for range n {
		env.Reset()
		for {
			if _, r, _, over := env.Step(rng.IntN(2)); r != 1 || over {
				break
			}
		}
		total += env.Steps
	}
	mean := float64(total) / n
	if mean < 18 || mean > 26 {
		t.Fatalf("random policy: mean episode length %.1f, want about 22", mean)
	}
	// Pushing always right tips the pole over sooner still.
	env.Reset()
	for {
		if _, _, terminal, over := env.Step(1); over {
			if !terminal || env.Steps > 15 {
				t.Fatalf("pushing right: ended after %d steps (terminal %v), want a fall within 15", env.Steps, terminal)
			}
			break
		}
	}
}

// The agent at seed 1 and its default settings on AG_TEST_DEVICE: after
// 2500 steps (about 70 episodes) its greedy policy keeps the pole up 100
// steps or more on average over 5 episodes (a random one: 22), and the
// last 10 training episodes, still partly exploring, last 40 or more.
func TestDQNLearns(t *testing.T) {
	dev := openDev(t)
	cfg := app.Config{}
	for _, p := range Spec.Params {
		cfg[p.Name] = p.Default
	}
	a, err := New(dev, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g0, err := a.GreedyLength(5)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 2500
	for i := range steps {
		if _, err := a.Step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	g1, err := a.GreedyLength(5)
	if err != nil {
		t.Fatal(err)
	}
	recent := a.RecentLength(10)
	t.Logf("%s: %d episodes; greedy length %.1f -> %.1f; last 10 training episodes %.1f; %d updates, buffer %s",
		dev, len(a.episodes), g0, g1, recent, a.updates, a.buf)
	if g1 < 100 {
		t.Errorf("greedy episode length %.1f after %d steps: want >= 100 (random: 22)", g1, steps)
	}
	if recent < 40 {
		t.Errorf("last 10 training episodes %.1f long: want >= 40", recent)
	}
	if a.learn.Records() != 1 {
		t.Errorf("the update was recorded %d times, want once (then replayed)", a.learn.Records())
	}
}
