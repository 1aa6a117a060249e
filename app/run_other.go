//go:build !js

package app

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"

	_ "github.com/ag-go/ag/backend/all" // every backend for -device
	"github.com/ag-go/ag/internal/browser/pageapi"
	"github.com/ag-go/ag/internal/outfile"
)

// Run trains spec's model natively with the command line's flags and exits:
// status 0 when it trained, 1 on an error, 2 on a bad flag. In a browser
// build (GOOS=js) it serves the page's API instead and never returns.
func Run(spec Spec) {
	if err := RunArgs(spec, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if _, ok := err.(usageError); ok {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError is a bad command line (flag prints the usage).
type usageError struct{ error }

// RunArgs is Run with its arguments and output given: flags -device (a
// driver name or "auto"), -steps, -eval-every, -profile-json FILE (a profile
// of a few steps after training, the JSON the page opens) and one flag per
// Param. It prints a line per eval-every steps (the loss, and the metrics
// of an Evaluator), then the final metrics and a Sampler's sample.
func RunArgs(spec Spec, args []string, out io.Writer) error {
	if err := spec.check(); err != nil {
		return err
	}
	fs := flag.NewFlagSet(spec.Name, flag.ContinueOnError)
	fs.SetOutput(out)
	device := fs.String("device", "auto", `device: "auto", "cpu", "webgpu", "ggml-cpu" or "ggml-vulkan"`)
	steps := fs.Int("steps", spec.steps(), "training steps")
	every := fs.Int("eval-every", 0, "print the loss (and metrics) every this many steps; 0: ten lines in all")
	// (a word in backquotes names the flag's value in -h: `FILE`, not "ag serve")
	profJSON := fs.String("profile-json", "", "after training, profile 5 steps and write the profile JSON to `FILE` (open it in the page of ag serve)")
	// A whole-number Param is an int flag, so -h says "-batch int ...
	// (1..4096)" rather than "float" and "4.194304e+06".
	vals := map[string]func() float64{}
	words := map[string]*string{}
	for _, p := range spec.Params {
		usage := fmt.Sprintf("%s (%s..%s)", p.Doc, formatNum(p.Min), formatNum(p.Max))
		if len(p.Choices) > 0 {
			words[p.Name] = fs.String(p.Name, p.Choices[int(math.Round(p.Default))], p.Doc+" ("+strings.Join(p.Choices, ", ")+")")
			continue
		}
		if p.Int {
			v := fs.Int64(p.Name, int64(math.Round(p.Default)), usage)
			vals[p.Name] = func() float64 { return float64(*v) }
		} else {
			v := fs.Float64(p.Name, p.Default, usage)
			vals[p.Name] = func() float64 { return *v }
		}
	}
	strs := map[string]*string{}
	for _, p := range spec.Strings {
		strs[p.Name] = fs.String(p.Name, p.Default, p.Doc)
	}
	files := map[string]*string{}
	for _, p := range spec.Files {
		files[p.Name] = fs.String(p.Name, "", "read `FILE`: "+p.Doc)
	}
	var save, load *string
	if spec.Checkpoint {
		save = fs.String("save", "", "after training, save the model to `FILE`")
		load = fs.String("load", "", "before training, load the model from `FILE` (one -save wrote)")
	}
	fs.Usage = func() {
		fmt.Fprintf(out, "%s: %s\n\nflags:\n", spec.Name, spec.Describe)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return nil
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("%s: unexpected arguments %q", spec.Name, fs.Args())}
	}
	if *steps < 1 {
		return usageError{fmt.Errorf("%s: -steps %d: want >= 1", spec.Name, *steps)}
	}
	// The steps between two lines are one train call, which reads the loss
	// once: at most pageapi.MaxEvery steps.
	if *every < 0 || *every > pageapi.MaxEvery {
		return usageError{fmt.Errorf("%s: -eval-every %d: want 0..%d (0: ten lines in all)", spec.Name, *every, pageapi.MaxEvery)}
	}
	if err := outfile.Check(*profJSON); err != nil {
		return usageError{fmt.Errorf("%s: -profile-json %s: %w", spec.Name, *profJSON, err)}
	}
	if save != nil {
		if err := outfile.Check(*save); err != nil {
			return usageError{fmt.Errorf("%s: -save %s: %w", spec.Name, *save, err)}
		}
	}
	g := given{nums: map[string]float64{}, choices: map[string]string{}, strs: map[string]string{}, files: map[string]File{}}
	var readErr error
	fs.Visit(func(f *flag.Flag) {
		if v, ok := vals[f.Name]; ok {
			g.nums[f.Name] = v()
		}
		if w, ok := words[f.Name]; ok {
			g.choices[f.Name] = *w
		}
		if v, ok := strs[f.Name]; ok {
			g.strs[f.Name] = *v
		}
		if path, ok := files[f.Name]; ok && *path != "" {
			b, err := os.ReadFile(*path)
			if err != nil && readErr == nil {
				readErr = fmt.Errorf("%s: -%s: %w", spec.Name, f.Name, err)
			}
			g.files[f.Name] = File{Name: *path, Data: b}
		}
	})
	if readErr != nil {
		return readErr
	}
	for k, w := range g.choices {
		if p, _ := spec.param(k); !slices.Contains(p.Choices, w) {
			return usageError{fmt.Errorf("%s: -%s %q: want one of %s", spec.Name, k, w, strings.Join(p.Choices, ", "))}
		}
	}
	s := newSession(&spec, "native")
	info, err := s.buildInput(g, *device)
	if err != nil {
		return err
	}
	defer s.dev.Close()
	var cfg []string
	for _, p := range spec.Params {
		v := formatNum(info.Config[p.Name])
		if len(p.Choices) > 0 {
			v = p.Choices[int(info.Config[p.Name])]
		}
		cfg = append(cfg, p.Name+"="+v)
	}
	fmt.Fprintf(out, "%s on %s: %s\n", spec.Name, info.Device, strings.Join(cfg, " "))
	if info.Built != "" {
		fmt.Fprintln(out, info.Built)
	}
	if info.Params > 0 {
		fmt.Fprintf(out, "%d parameters\n", info.Params)
	}
	for _, w := range info.Warnings {
		fmt.Fprintln(out, "warning:", w)
	}
	if load != nil && *load != "" {
		f, err := os.Open(*load)
		if err != nil {
			return fmt.Errorf("%s: -load: %w", spec.Name, err)
		}
		err = s.load(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: -load %s: %w", spec.Name, *load, err)
		}
		fmt.Fprintf(out, "loaded %s\n", *load)
	}
	n := *every
	if n < 1 {
		n = min(max(1, *steps/10), pageapi.MaxEvery)
	}
	done := 0
	for done < *steps {
		k := min(n, *steps-done)
		r, err := s.train(k, "", k, nil) // the loss printed is the only one read
		if err != nil {
			return err
		}
		done += k
		var ms float64
		for _, v := range r.StepMS {
			ms += v
		}
		line := fmt.Sprintf("step %6d  loss %.4f  %.2f ms/step", r.Total, r.LastLoss, ms/float64(len(r.StepMS)))
		if info.Eval && done < *steps {
			m, err := s.eval()
			if err != nil {
				return err
			}
			line += "  " + formatMetrics(m)
		}
		fmt.Fprintln(out, line)
	}
	if info.Eval {
		m, err := s.eval()
		if err != nil {
			return err
		}
		fmt.Fprintln(out, "metrics:", formatMetrics(m))
	}
	if save != nil && *save != "" {
		if err := saveFile(s, *save); err != nil {
			return fmt.Errorf("%s: -save %s: %w", spec.Name, *save, err)
		}
		fmt.Fprintf(out, "saved %s\n", *save)
	}
	if info.Sample {
		txt, err := s.sample()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "sample:\n%s\n", txt)
	}
	if *profJSON != "" {
		p, err := s.profile(info.Modes[len(info.Modes)-1], 5)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(p, "", " ")
		if err != nil {
			return fmt.Errorf("%s: encoding the profile: %w", spec.Name, err)
		}
		if err := os.WriteFile(*profJSON, b, 0o644); err != nil {
			return fmt.Errorf("%s: -profile-json: %w", spec.Name, err)
		}
		fmt.Fprintf(out, "profile (%s mode, 5 steps): %s\n", p.Mode, *profJSON)
	}
	return nil
}

// saveFile writes the session's checkpoint to path.
func saveFile(s *session, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := s.save(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// formatMetrics prints metrics as "name value" pairs in name order.
func formatMetrics(m Metrics) string {
	var parts []string
	for _, k := range metricNames(m) {
		parts = append(parts, fmt.Sprintf("%s %.4g", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
