package nn

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/core"
)

// stateFixture is a small model and optimizer that have taken one step,
// so that parameters, optimizer state, step and hyperparameters all differ
// from a fresh model's.
type stateFixture struct {
	model Sequential
	opt   Checkpointer
}

func newStateFixture(t testing.TB, dev *core.Device, kind string, seed uint64) stateFixture {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 6))
	model := MLP(dev, []int{3, 4, 2}, core.ReLU, r)
	var opt Checkpointer
	switch kind {
	case "adam":
		opt = NewAdamW(model.Params(), 0.01, 0.001)
	case "sgd":
		opt = NewSGD(model.Params(), 0.05, 0.9)
	case "nesterov":
		o := NewSGD(model.Params(), 0.05, 0.9)
		o.Nesterov = true
		opt = o
	case "amsgrad":
		o := NewAdamW(model.Params(), 0.01, 0.001)
		o.AMSGrad = true
		opt = o
	case "rmsprop":
		opt = NewRMSprop(model.Params(), 0.01)
	case "none":
		return stateFixture{model, nil}
	default:
		t.Fatalf("newStateFixture: unknown optimizer kind %q", kind)
	}
	loss := core.Mean(model.Forward(dev.Tensor([]float32{1, 2, 3, 4, 5, 6}, 2, 3)))
	if err := loss.Backward(); err != nil {
		t.Fatal(err)
	}
	if err := opt.Step(); err != nil {
		t.Fatal(err)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	return stateFixture{model, opt}
}

func (f stateFixture) save(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := SaveState(&buf, f.model, f.opt); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// stateSnapshot is everything LoadState may change, values as bits so that
// NaN compares equal to itself.
type stateSnapshot struct {
	values [][]uint32
	hyper  map[string]float64
	step   int
}

func snapshot(t testing.TB, m Module, opt Checkpointer) stateSnapshot {
	t.Helper()
	ts, err := stateTensors(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	var s stateSnapshot
	for _, x := range ts {
		v, err := x.Data()
		if err != nil {
			t.Fatal(err)
		}
		bits := make([]uint32, len(v))
		for i, f := range v {
			bits[i] = math.Float32bits(f)
		}
		s.values = append(s.values, bits)
	}
	if opt != nil {
		s.hyper, s.step = opt.Hyperparameters(), opt.StepCount()
	}
	return s
}

func (s stateSnapshot) diff(o stateSnapshot) string {
	for i := range s.values {
		if !slices.Equal(s.values[i], o.values[i]) {
			return fmt.Sprintf("tensor %d changed", i)
		}
	}
	if s.step != o.step {
		return fmt.Sprintf("step %d became %d", s.step, o.step)
	}
	for k, v := range s.hyper {
		if o.hyper[k] != v {
			return fmt.Sprintf("hyperparameter %s %g became %g", k, v, o.hyper[k])
		}
	}
	return ""
}

// splitState cuts a file into its header (decoded as generic JSON) and data.
func splitState(t testing.TB, file []byte) (map[string]any, []byte) {
	t.Helper()
	hlen := binary.LittleEndian.Uint32(file[8:12])
	var h map[string]any
	if err := json.Unmarshal(file[12:12+hlen], &h); err != nil {
		t.Fatal(err)
	}
	return h, file[12+hlen:]
}

// joinState writes a file from raw header bytes and data.
func joinState(header, data []byte) []byte {
	out := append([]byte(stateMagic), binary.LittleEndian.AppendUint32(nil, uint32(len(header)))...)
	return append(append(out, header...), data...)
}

// withHeader re-encodes file with its header changed by edit.
func withHeader(t testing.TB, file []byte, edit func(h map[string]any)) []byte {
	t.Helper()
	h, data := splitState(t, file)
	edit(h)
	hj, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	return joinState(hj, data)
}

func setHyperField(name string, v any) func(map[string]any) {
	return func(h map[string]any) { h["optimizer"].(map[string]any)["hyper"].(map[string]any)[name] = v }
}

// TestLoadStateRefuses feeds LoadState malformed and mismatched files. Each
// must be refused with an error that wraps ErrStateMismatch, wraps
// ErrStateCorrupt exactly when the file is malformed, names the field and
// value, and leaves model and optimizer unchanged.
func TestLoadStateRefuses(t *testing.T) {
	dev := openDev(t)
	adam := newStateFixture(t, dev, "adam", 5)
	sgd := newStateFixture(t, dev, "sgd", 5)
	good, goodSGD := adam.save(t), sgd.save(t)
	hdr := func(edit func(map[string]any)) []byte { return withHeader(t, good, edit) }
	rawHeader := func(s string) []byte { _, data := splitState(t, good); return joinState([]byte(s), data) }
	hlenIs := func(n uint32) []byte {
		b := slices.Clone(good[:12])
		binary.LittleEndian.PutUint32(b[8:], n)
		return b
	}
	for _, tc := range []struct {
		name    string
		file    []byte
		fix     stateFixture // loaded into (adam unless set)
		corrupt bool
		msg     string // the error names this
	}{
		{"empty", nil, adam, true, "file ends in the magic (0 of 8 bytes)"},
		{"bad magic", append([]byte("XGSTATE1"), good[8:]...), adam, true, `magic "XGSTATE1"`},
		{"no header length", good[:10], adam, true, "file ends in the header length (2 of 4 bytes)"},
		{"header length 0", hlenIs(0), adam, true, "header length 0 outside"},
		{"header length 4G", hlenIs(math.MaxUint32), adam, true, "header length 4294967295 outside"},
		{"truncated header", good[:40], adam, true, "file ends in the header (28 of"},
		{"header not JSON", rawHeader("hello, world"), adam, true, "header: invalid character"},
		{"header JSON null", rawHeader("null"), adam, true, "version 0, want 1"},
		{"header unknown field", hdr(func(h map[string]any) { h["extra"] = 1 }), adam, true, `unknown field "extra"`},
		{"header trailing JSON", rawHeader(`{"version":1} {}`), adam, true, "more after its JSON object"},
		{"version 2", hdr(func(h map[string]any) { h["version"] = 2 }), adam, true, "version 2, want 1"},
		{"version missing", hdr(func(h map[string]any) { delete(h, "version") }), adam, true, "version 0, want 1"},
		{"hyper empty", hdr(func(h map[string]any) { h["optimizer"].(map[string]any)["hyper"] = map[string]any{} }), adam, true, `"beta1" of adam is missing`},
		{"hyper missing eps", hdr(func(h map[string]any) { delete(h["optimizer"].(map[string]any)["hyper"].(map[string]any), "eps") }), adam, true, `"eps" of adam is missing`},
		{"hyper unknown", hdr(setHyperField("momentum", 0.9)), adam, true, `unknown hyperparameter "momentum" for adam`},
		{"lr negative", hdr(setHyperField("lr", -0.1)), adam, true, `"lr" is -0.1, want >= 0`},
		{"lr overflows float32", hdr(setHyperField("lr", 1e39)), adam, true, `"lr" is 1e+39, not a finite float32`},
		{"beta1 1", hdr(setHyperField("beta1", 1)), adam, true, `"beta1" is 1, want in [0, 1)`},
		{"beta2 negative", hdr(setHyperField("beta2", -0.5)), adam, true, `"beta2" is -0.5, want in [0, 1)`},
		{"eps 0", hdr(setHyperField("eps", 0)), adam, true, `"eps" is 0, want > 0`},
		{"eps underflows float32", hdr(setHyperField("eps", 1e-50)), adam, true, `"eps" is 1e-50, want > 0 as a float32`},
		{"weight decay negative", hdr(setHyperField("weight_decay", -1)), adam, true, `"weight_decay" is -1, want >= 0`},
		{"hyper not a number", hdr(setHyperField("lr", "fast")), adam, true, "header: json: cannot unmarshal string"},
		{"momentum negative", withHeader(t, goodSGD, setHyperField("momentum", -0.5)), sgd, true, `"momentum" is -0.5, want >= 0`},
		{"step negative", hdr(func(h map[string]any) { h["optimizer"].(map[string]any)["step"] = -5 }), adam, true, "step -5, want >= 0"},
		{"step missing", hdr(func(h map[string]any) { delete(h["optimizer"].(map[string]any), "step") }), adam, true, `optimizer "adam": step missing`},
		{"data truncated", good[:len(good)-5], adam, true, "file ends in the data of adam.v.3 (from value 0 of 2)"},
		{"data missing", good[:len(good)-4*60], adam, true, "file ends in the data of"},
		{"trailing byte", append(slices.Clone(good), 0), adam, true, "bytes after the data of 12 tensors"},
		{"trailing file", append(slices.Clone(good), good...), adam, true, "bytes after the data"},
		{"other optimizer", goodSGD, adam, false, `file has optimizer "sgd", loading into adam`},
		{"optimizer in file, none here", good, newStateFixture(t, dev, "none", 5), false, `file has optimizer "adam", loading into no optimizer`},
		{"tensor renamed", hdr(func(h map[string]any) { h["tensors"].([]any)[1].(map[string]any)["name"] = "param.9" }), adam, false, `tensor 1 is "param.9" [4]`},
		{"tensor reshaped", hdr(func(h map[string]any) { h["tensors"].([]any)[0].(map[string]any)["shape"] = []int{4, 3} }), adam, false, `tensor 0 is "param.0" [4 3] in the file, "param.0" [3 4] here`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := snapshot(t, tc.fix.model, tc.fix.opt)
			err := LoadState(bytes.NewReader(tc.file), tc.fix.model, tc.fix.opt)
			if !errors.Is(err, ErrStateMismatch) || errors.Is(err, ErrStateCorrupt) != tc.corrupt {
				t.Fatalf("got %v, want an error wrapping ErrStateMismatch (and ErrStateCorrupt: %v)", err, tc.corrupt)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if d := before.diff(snapshot(t, tc.fix.model, tc.fix.opt)); d != "" {
				t.Errorf("a refused load changed the state: %s", d)
			}
		})
	}
}

// TestLoadStateHeaderBound: a header length of 4 GB is refused before the
// header is allocated (the bound is a few KB per tensor of the model).
func TestLoadStateHeaderBound(t *testing.T) {
	fix := newStateFixture(t, openDev(t), "adam", 5)
	file := slices.Clone(fix.save(t)[:12])
	binary.LittleEndian.PutUint32(file[8:], 64<<20) // the old bound: 64 MB allocated for a 12-byte file
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err := LoadState(bytes.NewReader(file), fix.model, fix.opt)
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrStateCorrupt) {
		t.Fatalf("got %v, want ErrStateCorrupt", err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 1<<20 {
		t.Errorf("refusing a 12-byte file allocated %d bytes", alloc)
	}
}

// TestStateRoundTripKinds saves and loads each optimizer kind (and none)
// into a differently initialized model: every value bit for bit, the step
// and the hyperparameters.
func TestStateRoundTripKinds(t *testing.T) {
	dev := openDev(t)
	for _, kind := range []string{"adam", "sgd", "none", "nesterov", "amsgrad", "rmsprop"} {
		t.Run(kind, func(t *testing.T) {
			src, dst := newStateFixture(t, dev, kind, 5), newStateFixture(t, dev, kind, 9)
			if dst.opt != nil {
				setHyperOf(dst.opt, 0.5)
			}
			want := snapshot(t, src.model, src.opt)
			if d := want.diff(snapshot(t, dst.model, dst.opt)); d == "" {
				t.Fatal("the fixtures are equal before loading; the test would prove nothing")
			}
			if err := LoadState(bytes.NewReader(src.save(t)), dst.model, dst.opt); err != nil {
				t.Fatal(err)
			}
			if d := want.diff(snapshot(t, dst.model, dst.opt)); d != "" {
				t.Errorf("after load: %s", d)
			}
		})
	}
}

func setHyperOf(o Optimizer, lr float32) {
	switch o := o.(type) {
	case *Adam:
		o.LR = lr
	case *SGD:
		o.LR = lr
	case *RMSprop:
		o.LR = lr
	default:
		panic(fmt.Sprintf("setHyperOf: %T", o))
	}
}

// TestStateNonFinite: NaN and Inf weights are saved and loaded bit for bit
// (LoadState's documented choice), and SaveState refuses hyperparameters
// LoadState would refuse.
func TestStateNonFinite(t *testing.T) {
	dev := openDev(t)
	src, dst := newStateFixture(t, dev, "adam", 5), newStateFixture(t, dev, "adam", 9)
	w := src.model.Params()[0]
	nan := math.Float32frombits(0x7fc00001) // a NaN with a payload, to see the bits survive
	if err := w.WriteAt(0, []float32{nan, float32(math.Inf(1)), float32(math.Inf(-1))}); err != nil {
		t.Fatal(err)
	}
	if err := LoadState(bytes.NewReader(src.save(t)), dst.model, dst.opt); err != nil {
		t.Fatal(err)
	}
	if d := snapshot(t, src.model, src.opt).diff(snapshot(t, dst.model, dst.opt)); d != "" {
		t.Errorf("after load: %s", d)
	}
	for _, tc := range []struct {
		set func(*Adam)
		msg string
	}{
		{func(a *Adam) { a.LR = float32(math.NaN()) }, `"lr" is NaN, not a finite float32`},
		{func(a *Adam) { a.Eps = 0 }, `"eps" is 0, want > 0`},
		{func(a *Adam) { a.Beta2 = 1 }, `"beta2" is 1, want in [0, 1)`},
	} {
		a := newStateFixture(t, dev, "adam", 5)
		tc.set(a.opt.(*Adam))
		var buf bytes.Buffer
		err := SaveState(&buf, a.model, a.opt)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || buf.Len() != 0 {
			t.Errorf("SaveState: got %v with %d bytes written, want an error saying %q and nothing written", err, buf.Len(), tc.msg)
		}
	}
}

// failingValue fails its write when fail is set; it records what it holds.
type failingValue struct {
	v    []float32
	fail bool
}

func (f *failingValue) Data() ([]float32, error) { return slices.Clone(f.v), nil }
func (f *failingValue) WriteAt(off int, data []float32) error {
	if f.fail {
		return errors.New("device lost")
	}
	copy(f.v[off:], data)
	return nil
}

// TestWriteAllRestores: when the third of four writes fails, the first two
// get their old values back and the error names the tensor.
func TestWriteAllRestores(t *testing.T) {
	vs := []*failingValue{{v: []float32{1}}, {v: []float32{2}}, {v: []float32{3}, fail: true}, {v: []float32{4}}}
	dst := []stateValue{vs[0], vs[1], vs[2], vs[3]}
	err := writeAll("LoadState", dst, [][]float32{{10}, {20}, {30}, {40}}, []string{"a", "b", "c", "d"})
	if err == nil || !strings.Contains(err.Error(), "writing c: device lost") {
		t.Fatalf("got %v, want the write of c to fail", err)
	}
	for i, want := range []float32{1, 2, 3, 4} {
		if vs[i].v[0] != want {
			t.Errorf("value %d is %g after a failed load, want %g", i, vs[i].v[0], want)
		}
	}
}

// FuzzLoadState: whatever the bytes, LoadState either refuses them with an
// error wrapping ErrStateMismatch and leaves model and optimizer exactly as
// they were, or succeeds with a state that holds the file's data and valid
// hyperparameters.
//
//	go test -run x -fuzz FuzzLoadState -fuzztime 60s ./nn/
func FuzzLoadState(f *testing.F) {
	dev, err := core.Open("cpu")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { dev.Close() })
	fix := newStateFixture(f, dev, "adam", 5)
	good := fix.save(f)
	f.Add(good)
	f.Add(good[:len(good)-5])
	f.Add(append(slices.Clone(good), 1))
	f.Add(withHeader(f, good, setHyperField("eps", 0)))
	f.Add(withHeader(f, good, func(h map[string]any) { h["optimizer"].(map[string]any)["hyper"] = map[string]any{} }))
	f.Add(newStateFixture(f, dev, "sgd", 5).save(f))
	ts, err := stateTensors(fix.model, fix.opt)
	if err != nil {
		f.Fatal(err)
	}
	total := 0
	for _, x := range ts {
		total += x.Len()
	}
	f.Fuzz(func(t *testing.T, file []byte) {
		before := snapshot(t, fix.model, fix.opt)
		err := LoadState(bytes.NewReader(file), fix.model, fix.opt)
		after := snapshot(t, fix.model, fix.opt)
		if err != nil {
			if !errors.Is(err, ErrStateMismatch) {
				t.Fatalf("error does not wrap ErrStateMismatch: %v", err)
			}
			if d := before.diff(after); d != "" {
				t.Fatalf("refused (%v) but changed the state: %s", err, d)
			}
			return
		}
		data := file[len(file)-4*total:]
		for _, v := range after.values {
			for _, bits := range v {
				if got := binary.LittleEndian.Uint32(data); got != bits {
					t.Fatalf("loaded value %08x, the file holds %08x", bits, got)
				}
				data = data[4:]
			}
		}
		if err := checkHyper(fix.opt, after.hyper); err != nil || after.step < 0 {
			t.Fatalf("loaded hyperparameters %v step %d: %v", after.hyper, after.step, err)
		}
	})
}

// Adam's check without the map (hyperInRange, at every Step) agrees with
// the check of its Hyperparameters map.
func TestAdamHyperInRangeAgrees(t *testing.T) {
	dev, err := core.Open("cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	p := dev.Param([]float32{1}, 1)
	for i, set := range []func(a *Adam){
		func(a *Adam) {},
		func(a *Adam) { a.AMSGrad = true },
		func(a *Adam) { a.LR = float32(math.NaN()) },
		func(a *Adam) { a.LR = -1 },
		func(a *Adam) { a.Eps = 0 },
		func(a *Adam) { a.Beta1 = 1 },
		func(a *Adam) { a.Beta2 = -0.5 },
		func(a *Adam) { a.WeightDecay = float32(math.Inf(1)) },
	} {
		a := NewAdam([]*core.Tensor{p}, 0.01)
		set(a)
		h := a.Hyperparameters()
		if got, want := a.hyperInRange(), hyperOK(h, h); got != want {
			t.Errorf("case %d: hyperInRange %t, the map's check %t", i, got, want)
		}
	}
}
