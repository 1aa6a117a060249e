package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/profile"
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
	prof := fs.Bool("profile", false, "profile the steps after the first two and print the forward/backward reports, per-op tables, transfers and launches")
	trace := fs.String("trace", "", "with -profile: write a Chrome trace-event JSON file (open in Perfetto or chrome://tracing)")
	profJSON := fs.String("profile-json", "", "with -profile: write the whole profile as JSON (the web page opens it)")
	mode := fs.String("mode", "lazy", "step execution: lazy (one program per step), captured (one recorded program replayed), eager (a program per op)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch workload.Mode(*mode) {
	case workload.Lazy, workload.Captured, workload.Eager:
	default:
		return fmt.Errorf("-mode %q: want lazy, captured or eager", *mode)
	}
	if (*trace != "" || *profJSON != "") && !*prof {
		*prof = true
	}
	if *steps < 1 {
		return fmt.Errorf("-steps %d: want at least 1", *steps)
	}
	// workload.New takes an LR of 0 for its default (1e-3): -lr 0 trained
	// at 1e-3 while the model line said 0.
	if !(*lr > 0) || math.IsInf(*lr, 1) {
		return fmt.Errorf("-lr %v: want a finite number > 0", *lr)
	}
	if *every < 0 {
		return fmt.Errorf("-every %d: want >= 0 (0: about 12 lines)", *every)
	}
	for _, o := range []struct{ flag, path string }{{"trace", *trace}, {"profile-json", *profJSON}} {
		if err := checkOutput(o.flag, o.path); err != nil {
			return err
		}
	}
	// One file for both: the profile overwrote the trace after "wrote trace".
	if *trace != "" && *profJSON != "" && sameFile(*trace, *profJSON) {
		return fmt.Errorf("-trace %s and -profile-json %s: the same file, want two", *trace, *profJSON)
	}

	dev, err := core.Open(*device)
	if err != nil {
		return err
	}
	defer dev.Close()
	fmt.Printf("device: %s\n", dev)
	if *device == "auto" || *device == "" {
		if note := autoNote(dev.Name(), backend.Drivers()); note != "" {
			fmt.Println(note)
		}
	}
	fmt.Printf("model: %d Linear layers of %dx%d, ReLU, Adam lr %g, MSE; batch %d; %d steps, %s\n",
		*depth, *width, *width, *lr, *batch, *steps, *mode)

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
		if *prof && i == min(2, *steps-1) { // leave the compiling steps out
			startProfile()
		}
		s0 := time.Now()
		loss, err := m.StepMode(workload.Mode(*mode))
		if err != nil {
			return fmt.Errorf("step %d: %w", i, err)
		}
		dt := time.Since(s0)
		if *prof && i >= min(2, *steps-1) {
			profile.Step(dt)
		}
		times = append(times, dt)
		if i == 0 {
			first = loss
		}
		if i%*every == 0 || i == *steps-1 {
			fmt.Printf("step %4d/%d  loss %.6f  %7.2f ms/step\n", i+1, *steps, loss, ms(dt))
		}
		if i == *steps-1 {
			if loss < first {
				fmt.Printf("loss fell %.1fx (%.6f -> %.6f)\n", first/loss, first, loss)
			} else { // a rise (or NaN) is no fall of 0.8x
				fmt.Printf("loss did not fall (%.6f -> %.6f)\n", first, loss)
			}
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
	if *prof {
		return printProfile(dev.String(), dev.Info().Timer, *mode, *trace, *profJSON)
	}
	return nil
}

// autoNote says why "auto" chose the driver chosen rather than one ranked
// above it (drivers are listed best first), in one line: a fallback to a
// slower device must not pass unnoticed. It is "" when the best was chosen.
func autoNote(chosen string, drivers []backend.DriverInfo) string {
	var passed []string
	for _, d := range drivers {
		if d.Name == chosen {
			break
		}
		switch {
		case !d.OK:
			passed = append(passed, fmt.Sprintf("%s unavailable (%s)", d.Name, d.Why))
		case !d.Auto:
			passed = append(passed, fmt.Sprintf("%s not for auto (%s)", d.Name, d.Why))
		default:
			passed = append(passed, fmt.Sprintf("%s failed to open (-device %s shows why)", d.Name, d.Name))
		}
	}
	if len(passed) == 0 {
		return ""
	}
	return fmt.Sprintf("auto chose %s over: %s", chosen, strings.Join(passed, "; "))
}

func startProfile() {
	profile.Reset()
	profile.Forward(true)
	profile.Backward(true)
	profile.Switch(profile.PassUpdate, true)
	profile.Count(true)
}

// printProfile prints the reports of the profiled steps and writes the
// trace and JSON files asked for.
func printProfile(device, timer, mode, trace, jsonPath string) error {
	fmt.Println()
	for _, p := range []profile.Pass{profile.PassForward, profile.PassBackward, profile.PassUpdate} {
		r := profile.ReportPass(os.Stdout, p)
		if !r.Empty() {
			r.WriteOps(os.Stdout, 8)
		}
		fmt.Println()
	}
	profile.XferReport(os.Stdout, 20)
	fmt.Println()
	profile.LaunchReport(os.Stdout)
	snap := profile.Snapshot()
	snap.Device, snap.Timer, snap.Mode = device, timer, mode
	fmt.Printf("per-op times: %s\n", timer)
	fmt.Printf("\nprofiled %d steps: %.1f ms of %.1f ms wall attributed to named stages (%.1f%%)\n",
		snap.Steps, snap.AttributedMS, snap.StepTotalMS, snap.CoveragePct)
	if trace != "" {
		if err := writeFile(trace, profile.WriteTrace); err != nil {
			return fmt.Errorf("-trace: %w", err)
		}
		fmt.Println("wrote trace", trace)
	}
	if jsonPath != "" {
		err := writeFile(jsonPath, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			enc.SetIndent("", " ")
			return enc.Encode(snap)
		})
		if err != nil {
			return fmt.Errorf("-profile-json: %w", err)
		}
		fmt.Println("wrote profile", jsonPath)
	}
	return nil
}

// sameFile reports whether paths a and b name one file: the same path once
// made absolute, or (both existing) one file by os.SameFile.
func sameFile(a, b string) bool {
	aa, errA := filepath.Abs(a)
	ab, errB := filepath.Abs(b)
	if errA == nil && errB == nil && aa == ab {
		return true
	}
	ia, errA := os.Stat(a)
	ib, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(ia, ib)
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
