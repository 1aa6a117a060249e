package nn

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"testing"

	"github.com/ag-go/ag/core"
)

// TestPlateauStateResumes trains Adam under ReduceLROnPlateau (two
// updates an epoch, plateauMetric fed after each) for 16 epochs without
// a break, and again saved after epoch e by SaveState and resumed by a
// fresh model, optimizer and scheduler through LoadState: the rate of
// every epoch and the final weights must be the same, bit for bit. The
// save points fall before any epoch (best +Inf), amid bad epochs, in a
// cooldown and after reductions, where a fresh scheduler differs.
func TestPlateauStateResumes(t *testing.T) {
	dev := openDev(t)
	const epochs, steps = 16, 2
	n := len(optimGoldenW0)
	mk := func() (*core.Tensor, *Scheduled, *ReduceLROnPlateau) {
		w := dev.Param(f32s(optimGoldenW0), n)
		p := NewReduceLROnPlateau(0.05)
		p.Patience, p.Cooldown = 1, 1
		return w, WithReduceLROnPlateau(NewAdam([]*core.Tensor{w}, 0.05), p), p
	}
	run := func(w *core.Tensor, opt *Scheduled, p *ReduceLROnPlateau, from, to int, lrs []float64) {
		t.Helper()
		for e := from; e < to; e++ {
			trainQuad(t, w, opt, e*steps, steps, false)
			if _, err := p.Step(plateauMetric[e]); err != nil {
				t.Fatal(err)
			}
			lrs[e] = p.LR()
		}
	}
	w, opt, p := mk()
	want := make([]float64, epochs)
	run(w, opt, p, 0, epochs, want)
	wantW, err := w.Data()
	if err != nil {
		t.Fatal(err)
	}
	if want[epochs-1] > 0.05*0.1*0.1 {
		t.Fatalf("rates %v: fewer than 3 reductions, the test tests too little", want)
	}
	for _, save := range []int{0, 4, 5, 7, 10} {
		w, opt, p := mk()
		got := make([]float64, epochs)
		run(w, opt, p, 0, save, got)
		var buf bytes.Buffer
		if err := SaveState(&buf, Sequential{&Linear{W: w}}, opt); err != nil {
			t.Fatal(err)
		}
		w2, opt2, p2 := mk()
		if save > 0 && maps.Equal(p.ScheduleState(), p2.ScheduleState()) {
			t.Errorf("saved after %d epochs: the state equals a fresh scheduler's, the case tests nothing", save)
		}
		if err := LoadState(&buf, Sequential{&Linear{W: w2}}, opt2); err != nil {
			t.Fatalf("saved after %d epochs: LoadState: %v", save, err)
		}
		if !maps.EqualFunc(p.ScheduleState(), p2.ScheduleState(), func(a, b float64) bool { return a == b }) {
			t.Errorf("saved after %d epochs: state %v restored as %v", save, p.ScheduleState(), p2.ScheduleState())
		}
		run(w2, opt2, p2, save, epochs, got)
		gotW, err := w2.Data()
		if err != nil {
			t.Fatal(err)
		}
		for e := range got {
			if got[e] != want[e] {
				t.Errorf("saved after %d epochs: epoch %d rate %g, uninterrupted %g", save, e, got[e], want[e])
			}
		}
		for i := range gotW {
			if math.Float32bits(gotW[i]) != math.Float32bits(wantW[i]) {
				t.Errorf("saved after %d epochs: w[%d] = %g, uninterrupted %g", save, i, gotW[i], wantW[i])
			}
		}
	}

	// A file with a schedule state loads only into an optimizer with one
	// of its kind, and the other way round.
	w, opt, _ = mk()
	var withSched, without bytes.Buffer
	if err := SaveState(&withSched, Sequential{&Linear{W: w}}, opt); err != nil {
		t.Fatal(err)
	}
	if err := SaveState(&without, Sequential{&Linear{W: w}}, opt.Optimizer); err != nil {
		t.Fatal(err)
	}
	if err := LoadState(bytes.NewReader(withSched.Bytes()), Sequential{&Linear{W: w}}, opt.Optimizer); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("schedule state into an optimizer without one: %v, want ErrStateMismatch", err)
	}
	if err := LoadState(bytes.NewReader(without.Bytes()), Sequential{&Linear{W: w}}, opt); !errors.Is(err, ErrStateMismatch) {
		t.Errorf("no schedule state into a plateau schedule: %v, want ErrStateMismatch", err)
	}
	good := encodeSchedule(NewReduceLROnPlateau(0.1)).State
	for name, bad := range map[string]map[string]string{
		"negative bad epochs": {"num_bad_epochs": "-1"},
		"fractional epochs":   {"epochs": "1.5"},
		"not a number":        {"lr": "x"},
		"NaN best":            {"best": "NaN"},
		"zero base":           {"base_lr": "0"},
		"unknown":             {"extra": "1"},
	} {
		st := maps.Clone(good)
		maps.Copy(st, bad)
		if _, err := decodeSchedule(&stateSchedule{"reduce_lr_on_plateau", st}, NewReduceLROnPlateau(0.1)); !errors.Is(err, ErrStateCorrupt) {
			t.Errorf("%s: %v, want ErrStateCorrupt", name, err)
		}
	}
	if good["best"] != "+Inf" {
		t.Errorf("a fresh scheduler's best is written %q, want +Inf", good["best"])
	}
}
