package nn

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ag-go/ag/core"
	"github.com/ag-go/ag/safetensors"
)

// KeyMap relates a model's tensor names (NamedState) to a file's keys and
// layouts, for files written by other libraries. The zero KeyMap is the
// identity: keys are the names, layouts ag's.
type KeyMap struct {
	// Rename gives the file's key of the tensor the model names name; nil
	// keeps names as they are. Two tensors may not get the same key.
	Rename func(name string) string
	// Transposed lists (by the model's names) the 2-D tensors the file
	// holds transposed: PyTorch's nn.Linear keeps weight as [out, in],
	// ag's Linear W is [in, out]. Loading transposes them into the model,
	// saving writes them transposed. Every name must be one of the model's.
	Transposed []string
	// Ignore lists keys a file may hold that are no tensor of the model and
	// are skipped when loading, strict or not (reported in
	// LoadReport.Ignored): PyTorch's BatchNorm num_batches_tracked, which
	// ag does not keep. Saving writes none of them.
	Ignore []string
}

// PyTorchKeys is the KeyMap between m and the state_dict of a PyTorch
// model built the same way, layer for layer: the path of a tensor is kept
// (a Sequential's indices are PyTorch's), and the last part is renamed
// from ag's field to PyTorch's parameter for the layers of this package:
//
//	Linear        W -> weight (transposed: [in, out] is PyTorch's [out, in]), B -> bias
//	Conv1d/2d     W -> weight, B -> bias (same layout)
//	ConvTranspose1d/2d   W -> weight, B -> bias (same layout)
//	Embedding     W -> weight (same layout)
//	LayerNorm, RMSNorm, BatchNorm, GroupNorm, InstanceNorm   Gain -> weight, Bias -> bias
//	BatchNorm     RunningMean -> running_mean, RunningVar -> running_var
//
// Other names stay as NamedState gives them (a Namer's own names
// included). Struct fields become PyTorch's attribute names only where the
// Go field has that name, so a model of your own either names its fields
// so, renames further (wrap the returned Rename), or implements Namer.
// PyTorch's BatchNorm also saves num_batches_tracked, which ag does not
// keep: each BatchNorm's is in Ignore, so a strict load skips it.
// MultiHeadAttention's separate Q, K, V are PyTorch's packed in_proj_weight
// in one [3*Dim, Dim] tensor: no rename maps them.
func PyTorchKeys(m Module) (KeyMap, error) {
	st, err := namedState("PyTorchKeys", m)
	if err != nil {
		return KeyMap{}, err
	}
	by := leaves(m)
	types := map[reflect.Type]map[string]string{
		reflect.TypeFor[Linear]():          {"W": "weight", "B": "bias"},
		reflect.TypeFor[Conv1d]():          {"W": "weight", "B": "bias"},
		reflect.TypeFor[Conv2d]():          {"W": "weight", "B": "bias"},
		reflect.TypeFor[Embedding]():       {"W": "weight"},
		reflect.TypeFor[LayerNorm]():       {"Gain": "weight", "Bias": "bias"},
		reflect.TypeFor[RMSNorm]():         {"Gain": "weight"},
		reflect.TypeFor[BatchNorm]():       {"Gain": "weight", "Bias": "bias", "RunningMean": "running_mean", "RunningVar": "running_var"},
		reflect.TypeFor[GroupNorm]():       {"Gain": "weight", "Bias": "bias"},
		reflect.TypeFor[ConvTranspose1d](): {"W": "weight", "B": "bias"},
		reflect.TypeFor[ConvTranspose2d](): {"W": "weight", "B": "bias"},
	}
	keys := map[string]string{}
	var km KeyMap
	for _, n := range st {
		l := by[n.Tensor]
		to, ok := types[l.owner][l.field]
		if !ok || !strings.HasSuffix(n.Name, l.field) {
			continue
		}
		keys[n.Name] = strings.TrimSuffix(n.Name, l.field) + to
		if l.owner == reflect.TypeFor[BatchNorm]() && l.field == "RunningMean" {
			km.Ignore = append(km.Ignore, strings.TrimSuffix(n.Name, l.field)+"num_batches_tracked")
		}
		if l.owner == reflect.TypeFor[Linear]() && l.field == "W" {
			km.Transposed = append(km.Transposed, n.Name)
		}
	}
	km.Rename = func(name string) string {
		if k, ok := keys[name]; ok {
			return k
		}
		return name
	}
	return km, nil
}

// resolved is a model tensor with its key in the file.
type resolved struct {
	Named
	key        string
	transposed bool
}

// resolve applies km to the named tensors, checking that keys are unique
// and Transposed names the model's 2-D tensors.
func (km KeyMap) resolve(fn string, st []Named) ([]resolved, error) {
	tr := map[string]bool{}
	for _, n := range km.Transposed {
		tr[n] = true
	}
	out := make([]resolved, len(st))
	byKey := map[string]string{}
	for i, n := range st {
		key := n.Name
		if km.Rename != nil {
			key = km.Rename(n.Name)
		}
		if key == "" || key == safetensors.MetadataKey {
			return nil, fmt.Errorf("nn.%s: KeyMap.Rename maps %q to %q, which cannot be a key", fn, n.Name, key)
		}
		if other, ok := byKey[key]; ok {
			return nil, fmt.Errorf("nn.%s: KeyMap.Rename maps both %q and %q to %q", fn, other, n.Name, key)
		}
		byKey[key] = n.Name
		out[i] = resolved{n, key, tr[n.Name]}
		if tr[n.Name] && n.Tensor.Rank() != 2 {
			return nil, fmt.Errorf("nn.%s: KeyMap.Transposed names %q of shape %v, which is not 2-D", fn, n.Name, n.Tensor.Shape())
		}
		delete(tr, n.Name)
	}
	if len(tr) > 0 {
		return nil, fmt.Errorf("nn.%s: KeyMap.Transposed names %q, which is not a tensor of the model", fn, slices.Sorted(maps.Keys(tr)))
	}
	for _, k := range km.Ignore {
		if n, ok := byKey[k]; ok {
			return nil, fmt.Errorf("nn.%s: KeyMap.Ignore lists %q, the key of the model's %q", fn, k, n)
		}
	}
	return out, nil
}

// fileShape is the shape of r in the file.
func (r resolved) fileShape() []int {
	s := r.Tensor.Shape()
	if r.transposed {
		s[0], s[1] = s[1], s[0]
	}
	return s
}

// transpose2 returns the [c, r] transpose of v, a row-major [r, c].
func transpose2(v []float32, r, c int) []float32 {
	out := make([]float32, len(v))
	for i := range r {
		for j := range c {
			out[j*r+i] = v[i*c+j]
		}
	}
	return out
}

// SaveOptions sets how SaveSafetensors writes a model; the zero value
// writes every tensor as F32 under its NamedState name.
type SaveOptions struct {
	// DType of every tensor written: F32 ("" too), or F16 or BF16, whose
	// values are rounded to the nearest, ties to even (a value past 65504
	// becomes Inf in F16). A file of half values loads as those values.
	DType safetensors.DType
	// Metadata is written in the header's "__metadata__".
	Metadata map[string]string
	// Keys maps names to the file's keys and layouts (see PyTorchKeys).
	Keys KeyMap
}

// SaveSafetensors writes m's parameters and buffers (NamedState, in that
// order) as a safetensors file: the weights only, no optimizer (see
// SaveOptimizerSafetensors) and no hyperparameter of any layer. It syncs
// the device to read the values.
func SaveSafetensors(w io.Writer, m Module, opt SaveOptions) error {
	switch opt.DType {
	case "", safetensors.F32, safetensors.F16, safetensors.BF16:
	default:
		return fmt.Errorf("nn.SaveSafetensors: dtype %q, want F32, F16 or BF16", opt.DType)
	}
	st, err := namedState("SaveSafetensors", m)
	if err != nil {
		return err
	}
	rs, err := opt.Keys.resolve("SaveSafetensors", st)
	if err != nil {
		return err
	}
	f := &safetensors.File{Metadata: opt.Metadata}
	for _, r := range rs {
		v, err := r.Tensor.Data()
		if err != nil {
			return fmt.Errorf("nn.SaveSafetensors: reading %s: %w", r.Name, err)
		}
		if r.transposed {
			v = transpose2(v, r.Tensor.Dim(0), r.Tensor.Dim(1))
		}
		f.Tensors = append(f.Tensors, safetensors.Tensor{Name: r.key, DType: opt.DType, Shape: r.fileShape(), Data: v})
	}
	if err := safetensors.Write(w, f); err != nil {
		return fmt.Errorf("nn.SaveSafetensors: %w", err)
	}
	return nil
}

// LoadOptions sets how LoadSafetensors matches a file to a model. The zero
// value is strict, as PyTorch's load_state_dict(strict=True).
type LoadOptions struct {
	// NonStrict loads the tensors the file has for the model and leaves the
	// others as they are, the report listing the keys missing from the
	// file and those unexpected in it (PyTorch's strict=False). Without
	// it a file is refused unless its keys are exactly the model's (less
	// Keys.Ignore): none missing, none unexpected.
	NonStrict bool
	// Keys maps the model's names to the file's keys and layouts (see
	// PyTorchKeys).
	Keys KeyMap
}

// LoadReport is what LoadSafetensors found besides the tensors it loaded.
type LoadReport struct {
	// Missing are the keys of the model's tensors that the file lacks, in
	// NamedState order; Unexpected the file's keys that are no tensor of
	// the model, in file order; Ignored the file's keys that KeyMap.Ignore
	// lists, skipped, in file order.
	Missing, Unexpected, Ignored []string
	// Metadata is the file's "__metadata__" (nil if none).
	Metadata map[string]string
}

// LoadSafetensors reads a safetensors file (all of r) into m's parameters
// and buffers, matched by key (NamedState names through opt.Keys).
// Weights only: it changes no layer's hyperparameter (eps, heads,
// dropout, ...) and no optimizer; loading an optimizer is
// LoadOptimizerSafetensors. Values of F16, BF16 (exactly), F64 (rounded)
// or whole-number I64/I32 tensors are converted to f32.
//
// Loads are strict unless opt.NonStrict asks otherwise: a key of the
// model the file lacks, or a key of the file that is no tensor of the
// model (nor in opt.Keys.Ignore), refuses the file, the error naming the
// first few of each and their counts (a file of PyTorch's keys needs
// PyTorchKeys).
//
// Everything is checked before any tensor changes: the file's format (see
// safetensors.Read), every matched tensor's shape (a mismatch is an error
// strict or not, as in PyTorch), and, strict, that no key is missing or
// unexpected. A refused file is an error wrapping ErrStateMismatch (and
// ErrStateCorrupt and safetensors.ErrInvalid when malformed) naming the
// key and shapes, and nothing is changed; the report is returned with it
// when it was made. If a write to the device fails part-way, the tensors
// already written get their values back. Values load bit for bit, NaN and
// Inf included.
func LoadSafetensors(r io.Reader, m Module, opt LoadOptions) (LoadReport, error) {
	st, err := namedState("LoadSafetensors", m)
	if err != nil {
		return LoadReport{}, err
	}
	rs, err := opt.Keys.resolve("LoadSafetensors", st)
	if err != nil {
		return LoadReport{}, err
	}
	f, err := readSafetensors("LoadSafetensors", r)
	if err != nil {
		return LoadReport{}, err
	}
	rep := LoadReport{Metadata: f.Metadata}
	byKey := map[string]int{}
	for i, t := range f.Tensors {
		byKey[t.Name] = i
	}
	used := map[string]bool{}
	var dst []stateValue
	var vals [][]float32
	var names []string
	for _, r := range rs {
		i, ok := byKey[r.key]
		if !ok {
			rep.Missing = append(rep.Missing, r.key)
			continue
		}
		used[r.key] = true
		t := f.Tensors[i]
		if want := r.fileShape(); !slices.Equal(t.Shape, want) {
			how := ""
			if r.transposed {
				how = fmt.Sprintf(" (transposed from its %v)", r.Tensor.Shape())
			}
			return rep, fmt.Errorf("nn.LoadSafetensors: tensor %q has shape %v, the model's is %v%s: %w", r.key, t.Shape, want, how, ErrStateMismatch)
		}
		v := t.Data
		if r.transposed {
			v = transpose2(v, t.Shape[0], t.Shape[1])
		}
		dst, vals, names = append(dst, r.Tensor), append(vals, v), append(names, r.key)
	}
	for _, t := range f.Tensors {
		switch {
		case used[t.Name]:
		case slices.Contains(opt.Keys.Ignore, t.Name):
			rep.Ignored = append(rep.Ignored, t.Name)
		default:
			rep.Unexpected = append(rep.Unexpected, t.Name)
		}
	}
	if !opt.NonStrict && (len(rep.Missing) > 0 || len(rep.Unexpected) > 0) {
		hint := "LoadOptions.NonStrict loads the keys that match"
		if opt.Keys.Rename == nil && slices.ContainsFunc(rep.Unexpected, func(k string) bool {
			return strings.HasSuffix(k, ".weight") || strings.HasSuffix(k, ".bias")
		}) {
			hint = "PyTorch's keys? nn.PyTorchKeys maps them; " + hint
		}
		return rep, fmt.Errorf("nn.LoadSafetensors: %d missing keys %s, %d unexpected keys %s (%s): %w",
			len(rep.Missing), few(rep.Missing), len(rep.Unexpected), few(rep.Unexpected), hint, ErrStateMismatch)
	}
	if err := writeAll("LoadSafetensors", dst, vals, names); err != nil {
		return rep, err
	}
	return rep, nil
}

// few quotes the first keys of ks, for an error message.
func few(ks []string) string {
	const n = 8
	if len(ks) <= n {
		return fmt.Sprintf("%q", ks)
	}
	return fmt.Sprintf("%q and %d more", ks[:n], len(ks)-n)
}

// readSafetensors reads a file, a malformed one as an error of fn that
// wraps ErrStateCorrupt.
func readSafetensors(fn string, r io.Reader) (*safetensors.File, error) {
	f, err := safetensors.Read(r)
	if errors.Is(err, safetensors.ErrInvalid) {
		return nil, fmt.Errorf("nn.%s: %w (%w)", fn, err, ErrStateCorrupt)
	}
	if err != nil {
		return nil, fmt.Errorf("nn.%s: %w", fn, err)
	}
	return f, nil
}

// Metadata keys of an optimizer file.
const (
	optKindKey  = "optimizer"
	optStepKey  = "step"
	optHyperKey = "hyper." // then the hyperparameter's name
)

// optimizerLayout returns the keys and tensors' shapes of o's state, slot
// by slot: "<kind>.<slot>.<parameter name>", e.g. "adam.m.Blocks.0.FF1.W".
func optimizerLayout(fn string, m Module, opt Checkpointer) (keys []string, shapes [][]int, err error) {
	ps, err := NamedParams(m)
	if err != nil {
		return nil, nil, fmt.Errorf("nn.%s: %w", fn, err)
	}
	name := map[*core.Tensor]string{}
	for _, p := range ps {
		name[p.Tensor] = p.Name
	}
	for _, slot := range opt.StateSlots() {
		for i, p := range opt.Params() {
			n, ok := name[p]
			if !ok {
				return nil, nil, fmt.Errorf("nn.%s: parameter %d of the %s optimizer (shape %v) is not a parameter of %T", fn, i, opt.Kind(), p.Shape(), m)
			}
			keys = append(keys, opt.Kind()+"."+slot+"."+n)
			shapes = append(shapes, p.Shape())
		}
	}
	return keys, shapes, nil
}

// SaveOptimizerSafetensors writes o's state as a safetensors file of its
// own, apart from the weights: every state tensor as F32 under
// "<kind>.<slot>.<parameter name>" (names as NamedParams(m) gives them:
// "adam.m.0.W", "adam.v.0.W", ...), and in the metadata the kind
// ("optimizer": "adam"), the step count ("step") and each hyperparameter
// ("hyper.lr", ... as exact decimal strings). Every parameter of o must be
// one of m's. It refuses hyperparameters LoadOptimizerSafetensors would
// refuse, so every file it writes can be loaded. It syncs the device.
func SaveOptimizerSafetensors(w io.Writer, m Module, o Optimizer) error {
	const fn = "SaveOptimizerSafetensors"
	opt, err := checkpointer(fn, o)
	if err != nil {
		return err
	}
	if opt == nil {
		return fmt.Errorf("nn.%s: nil optimizer", fn)
	}
	keys, _, err := optimizerLayout(fn, m, opt)
	if err != nil {
		return err
	}
	hyper := opt.Hyperparameters()
	if err := checkHyper(opt, hyper); err != nil {
		return fmt.Errorf("nn.%s: %w", fn, err)
	}
	st, err := opt.State()
	if err != nil {
		return fmt.Errorf("nn.%s: %w", fn, err)
	}
	if len(st) != len(keys) {
		return fmt.Errorf("nn.%s: %s optimizer: State returned %d tensors, want %d", fn, opt.Kind(), len(st), len(keys))
	}
	f := &safetensors.File{Metadata: map[string]string{optKindKey: opt.Kind(), optStepKey: strconv.Itoa(opt.StepCount())}}
	for k, v := range hyper {
		f.Metadata[optHyperKey+k] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	for i, t := range st {
		v, err := t.Data()
		if err != nil {
			return fmt.Errorf("nn.%s: reading %s: %w", fn, keys[i], err)
		}
		f.Tensors = append(f.Tensors, safetensors.Tensor{Name: keys[i], Shape: t.Shape(), Data: v})
	}
	if err := safetensors.Write(w, f); err != nil {
		return fmt.Errorf("nn.%s: %w", fn, err)
	}
	return nil
}

// OptimizerLoadOptions sets what LoadOptimizerSafetensors restores besides
// the state tensors and the step count.
type OptimizerLoadOptions struct {
	// Hyperparameters restores the file's hyperparameters (learning rate,
	// betas, ...) into the optimizer; then the file must hold exactly the
	// optimizer's. Without it they are checked and returned, never set:
	// loading does not silently change a learning rate you chose.
	Hyperparameters bool
}

// OptimizerFile is what an optimizer file says besides its tensors.
type OptimizerFile struct {
	Kind            string
	Step            int
	Hyperparameters map[string]float64
}

// LoadOptimizerSafetensors reads a file written by SaveOptimizerSafetensors
// (all of r) into o: its state tensors (by key, every one, nothing more:
// an optimizer file is always strict) and its step count, and, only when
// opt.Hyperparameters is set, its hyperparameters. It returns what the
// file says. m names o's parameters, as when saving.
//
// Everything is checked before anything changes: the format, the kind
// (the optimizer's Kind), a whole step >= 0, every hyperparameter finite
// and in range (as LoadState checks them), the keys and shapes. Errors
// wrap ErrStateMismatch (and ErrStateCorrupt when malformed). The one
// trace a refused load may leave is an optimizer's state created as zeros,
// which its first Step would create.
func LoadOptimizerSafetensors(r io.Reader, m Module, o Optimizer, opt OptimizerLoadOptions) (OptimizerFile, error) {
	const fn = "LoadOptimizerSafetensors"
	c, err := checkpointer(fn, o)
	if err != nil {
		return OptimizerFile{}, err
	}
	if c == nil {
		return OptimizerFile{}, fmt.Errorf("nn.%s: nil optimizer", fn)
	}
	keys, shapes, err := optimizerLayout(fn, m, c)
	if err != nil {
		return OptimizerFile{}, err
	}
	f, err := readSafetensors(fn, r)
	if err != nil {
		return OptimizerFile{}, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("nn.%s: "+format+": %w", append([]any{fn}, append(args, ErrStateCorrupt)...)...)
	}
	kind, ok := f.Metadata[optKindKey]
	if !ok {
		return OptimizerFile{}, bad("no %q in the metadata: not an optimizer file", optKindKey)
	}
	if kind != c.Kind() {
		return OptimizerFile{}, fmt.Errorf("nn.%s: file has optimizer %q, loading into %q: %w", fn, kind, c.Kind(), ErrStateMismatch)
	}
	step, err := strconv.Atoi(f.Metadata[optStepKey])
	if err != nil || step < 0 {
		return OptimizerFile{}, bad("step %q, want a whole number >= 0", f.Metadata[optStepKey])
	}
	hyper := map[string]float64{}
	for k, s := range f.Metadata {
		name, ok := strings.CutPrefix(k, optHyperKey)
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return OptimizerFile{}, bad("hyperparameter %q is %q, not a number", name, s)
		}
		if err := hyperRange(name, v); err != nil {
			return OptimizerFile{}, bad("%v", err)
		}
		hyper[name] = v
	}
	if opt.Hyperparameters {
		if err := checkHyper(c, hyper); err != nil {
			return OptimizerFile{}, fmt.Errorf("nn.%s: restoring hyperparameters: %v: %w", fn, err, ErrStateMismatch)
		}
	}
	byKey := map[string]safetensors.Tensor{}
	for _, t := range f.Tensors {
		byKey[t.Name] = t
	}
	vals := make([][]float32, len(keys))
	for i, k := range keys {
		t, ok := byKey[k]
		if !ok {
			return OptimizerFile{}, fmt.Errorf("nn.%s: tensor %q missing (the file has %d tensors, the %s optimizer %d): %w", fn, k, len(f.Tensors), kind, len(keys), ErrStateMismatch)
		}
		if !slices.Equal(t.Shape, shapes[i]) {
			return OptimizerFile{}, fmt.Errorf("nn.%s: tensor %q has shape %v, the optimizer's is %v: %w", fn, k, t.Shape, shapes[i], ErrStateMismatch)
		}
		vals[i] = t.Data
		delete(byKey, k)
	}
	if len(byKey) > 0 {
		return OptimizerFile{}, fmt.Errorf("nn.%s: unexpected tensors %s: %w", fn, few(slices.Sorted(maps.Keys(byKey))), ErrStateMismatch)
	}
	st, err := c.State()
	if err != nil {
		return OptimizerFile{}, fmt.Errorf("nn.%s: %w", fn, err)
	}
	if len(st) != len(keys) {
		return OptimizerFile{}, fmt.Errorf("nn.%s: %s optimizer: State returned %d tensors, want %d", fn, kind, len(st), len(keys))
	}
	dst := make([]stateValue, len(st))
	for i, t := range st {
		dst[i] = t
	}
	if err := writeAll(fn, dst, vals, keys); err != nil {
		return OptimizerFile{}, err
	}
	c.SetStepCount(step)
	if opt.Hyperparameters {
		c.SetHyperparameters(hyper)
	}
	return OptimizerFile{Kind: kind, Step: step, Hyperparameters: hyper}, nil
}
