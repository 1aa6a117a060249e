package main

import (
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/internal/workload"
)

func demo(args []string) error {
	fs := flag.NewFlagSet("demo", flag.ExitOnError)
	device := fs.String("device", "auto", "backend: auto, cpu, webgpu, ggml-vulkan, ggml-cpu")
	width := fs.Int("width", 1024, "layer width")
	depth := fs.Int("depth", 4, "number of Linear layers")
	batch := fs.Int("batch", 64, "batch size")
	steps := fs.Int("steps", 60, "training steps")
	lr := fs.Float64("lr", 1e-3, "Adam learning rate")
	every := fs.Int("every", 0, "print the loss every N steps (0: about 12 lines)")
	fs.Parse(args)
	if *steps < 1 {
		return fmt.Errorf("-steps %d: want at least 1", *steps)
	}

	dev, err := core.Open(*device)
	if err != nil {
		return err
	}
	defer dev.Close()
	fmt.Printf("device: %s\n", dev)
	fmt.Printf("model: %d Linear layers of %dx%d, ReLU, Adam lr %g, MSE; batch %d; %d steps\n",
		*depth, *width, *width, *lr, *batch, *steps)

	t0 := time.Now()
	m, err := workload.New(dev, workload.Config{Width: *width, Depth: *depth, Batch: *batch, LR: float32(*lr), Seed: 1})
	if err != nil {
		return err
	}
	fmt.Printf("setup: %.0f ms\n", ms(time.Since(t0)))
	if *every <= 0 {
		*every = max(1, *steps/12)
	}
	var times []time.Duration
	var first float32
	for i := 0; i < *steps; i++ {
		s0 := time.Now()
		loss, err := m.Step()
		if err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		dt := time.Since(s0)
		times = append(times, dt)
		if i == 0 {
			first = loss
		}
		if i%*every == 0 || i == *steps-1 {
			fmt.Printf("step %4d/%d  loss %.6f  %7.2f ms/step\n", i+1, *steps, loss, ms(dt))
		}
		if i == *steps-1 {
			fmt.Printf("loss fell %.1fx (%.6f -> %.6f)\n", first/loss, first, loss)
		}
	}
	steady := times
	if len(times) > 2 {
		steady = times[2:] // the first steps compile
	}
	slices.Sort(steady)
	med := steady[len(steady)/2]
	fmt.Printf("step time: median %.2f ms, min %.2f ms (%.1f GFLOP/s); first step %.1f ms (compiles)\n",
		ms(med), ms(steady[0]), m.FLOPs()/med.Seconds()/1e9, ms(times[0]))
	st := dev.Stats()
	fmt.Printf("device work: %d runs, %d compiles, %d uploads (%.1f MB), %d downloads (%.3f MB)\n",
		st.Runs, st.Compiles, st.Uploads, float64(st.UpBytes)/1e6, st.Downloads, float64(st.DownBytes)/1e6)
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
