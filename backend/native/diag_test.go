//go:build ggml

package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/bench/workload"
	"github.com/ag-go/ag/core"
)

// The diagnostics below measure; they check nothing but that the runs
// succeed. They run only when AG_NATIVE_DIAG=1 (on a GPU machine, by hand):
//
//	AG_NATIVE_DIAG=1 go test -tags ggml -run Diag -v ./backend/native/
//
// AG_DIAG_DEV picks the driver (default ggml-vulkan), AG_DIAG_VARIANTS the
// AG_GGML_MM_ROWS settings to compare (default "0,auto"), AG_DIAG_BATCH,
// AG_DIAG_MODES, AG_DIAG_REPS and AG_DIAG_WIDTH the step workload.

func diagEnv(t *testing.T) {
	if os.Getenv("AG_NATIVE_DIAG") != "1" {
		t.Skip("AG_NATIVE_DIAG=1 runs the diagnostics")
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func envInts(k, def string) []int {
	var out []int
	for _, f := range strings.Split(envOr(k, def), ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func median(ts []time.Duration) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestDiagStep times the workload's training step per mode and splits each
// step's host time into compute, bind, uploads, downloads and the rest
// (recording, autograd, lowering in core).
func TestDiagStep(t *testing.T) {
	diagEnv(t)
	name := envOr("AG_DIAG_DEV", VulkanName)
	width := envInts("AG_DIAG_WIDTH", "1024")[0]
	reps := envInts("AG_DIAG_REPS", "20")[0]
	for _, variant := range strings.Split(envOr("AG_DIAG_VARIANTS", "0,auto"), ",") {
		os.Setenv(mmRowsEnv, variant)
		dev, err := core.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range envInts("AG_DIAG_BATCH", "64,256,1024") {
			for _, mode := range strings.Split(envOr("AG_DIAG_MODES", "lazy,captured"), ",") {
				m, err := workload.New(dev, workload.Config{Width: width, Depth: 4, Batch: b, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				if _, _, err := m.Timed(workload.Mode(mode), 3); err != nil {
					t.Fatal(err)
				}
				s0 := stats.snapshot()
				times, loss, err := m.Timed(workload.Mode(mode), reps)
				if err != nil {
					t.Fatal(err)
				}
				s1 := stats.snapshot()
				per := func(k string) float64 { return float64(s1[k]-s0[k]) / float64(reps) }
				ms := func(k string) float64 { return per(k) / 1e6 }
				var sum time.Duration
				for _, d := range times {
					sum += d
				}
				mean := float64(sum) / float64(reps) / 1e6
				other := mean - ms("computeNs") - ms("bindNs") - ms("writeNs") - ms("readNs") - ms("allocNs") - ms("compileNs")
				fmt.Printf("DIAG step rows=%-4s b%-5d %-8s median %.3f ms min %.3f mean %.3f | compute %.3f bind %.3f | up %.1f x %.3f | down %.1f x %.3f | alloc %.1f x %.3f | compiles %.1f | other %.3f | loss %.5f\n",
					variant, b, mode, ms2(median(times)), ms2(slices.Min(times)), mean,
					ms("computeNs"), ms("bindNs"), per("writes"), ms("writeNs"), per("reads"), ms("readNs"),
					per("allocs"), ms("allocNs"), per("compiles"), other, loss)
			}
		}
		if err := dev.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func ms2(d time.Duration) float64 { return float64(d) / 1e6 }

// TestDiagMatMul times one matmul program per shape and variant at the
// backend level (no core): the training step's shapes, NN, NT and TN.
func TestDiagMatMul(t *testing.T) {
	diagEnv(t)
	name := envOr("AG_DIAG_DEV", VulkanName)
	be := open(t, name)
	d := be.(*device)
	w := envInts("AG_DIAG_WIDTH", "1024")[0]
	type shape struct {
		m, k, n int
		ta, tb  bool
		label   string
	}
	var shapes []shape
	for _, b := range envInts("AG_DIAG_BATCH", "64,256,1024") {
		shapes = append(shapes,
			shape{b, w, w, false, false, "fwd x·W"},
			shape{b, w, w, false, true, "dX g·W^T"},
			shape{w, b, w, true, false, "dW x^T·g"})
	}
	for _, n := range envInts("AG_DIAG_SQUARE", "1024,4096") {
		shapes = append(shapes, shape{n, n, n, false, false, "square"})
	}
	reps := envInts("AG_DIAG_REPS", "20")[0]
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range shapes {
		aShape, bShape := []int{s.m, s.k}, []int{s.k, s.n}
		if s.ta {
			aShape = []int{s.k, s.m}
		}
		if s.tb {
			bShape = []int{s.n, s.k}
		}
		g := &backend.Graph{NumArgs: 3, Nodes: []backend.Node{arg(0, aShape...), arg(1, bShape...),
			{Op: backend.OpMatMul, In: []int{0, 1}, Shape: []int{s.m, s.n}, TransA: s.ta, TransB: s.tb}},
			Outputs: []backend.Output{{Node: 2, Arg: 2}}}
		av, bv := randVals(r, s.m*s.k), randVals(r, s.k*s.n)
		args := []backend.Buffer{upload(t, be, av), upload(t, be, bv), upload(t, be, make([]float32, s.m*s.n))}
		// at(i,k) and bt(k,j) read the multiplied operands from storage
		at := func(i, k int) float64 {
			if s.ta {
				return float64(av[k*s.m+i])
			}
			return float64(av[i*s.k+k])
		}
		bt := func(k, j int) float64 {
			if s.tb {
				return float64(bv[j*s.k+k])
			}
			return float64(bv[k*s.n+j])
		}
		for _, variant := range strings.Split(envOr("AG_DIAG_VARIANTS", "0,auto"), ",") {
			os.Setenv(mmRowsEnv, variant)
			p, err := be.Compile(g)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if _, err := p.Run(args); err != nil {
					t.Fatal(err)
				}
			}
			times := make([]time.Duration, reps)
			for i := range times {
				t0 := time.Now()
				if _, err := p.Run(args); err != nil {
					t.Fatal(err)
				}
				times[i] = time.Since(t0)
			}
			med := median(times)
			// error on 64 sampled entries, relative to sum |a||b|
			out := download(t, be, args[2])
			maxRel := 0.0
			for q := range 64 {
				i, j := (q*7919)%s.m, (q*104729)%s.n
				var want, scale float64
				for k := range s.k {
					want += at(i, k) * bt(k, j)
					scale += math.Abs(at(i, k) * bt(k, j))
				}
				maxRel = max(maxRel, math.Abs(float64(out[i*s.n+j])-want)/scale)
			}
			fmt.Printf("DIAG matmul rows=%-4s %-9s M%-5d K%-5d N%-5d split %-3d median %8.1f us min %8.1f us %6.2f TFLOP/s relerr %.1e\n",
				variant, s.label, s.m, s.k, s.n, d.mmSplitRows(s.m, s.n, false), float64(med)/1e3, float64(slices.Min(times))/1e3,
				2*float64(s.m)*float64(s.k)*float64(s.n)/float64(med)/1e3, maxRel)
			p.Release()
		}
	}
}
