package nn

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ag-go/ag/core"
)

// Named is a tensor with its name in a module tree, e.g. "Blocks.0.Attn.Q.W".
type Named struct {
	Name   string
	Tensor *core.Tensor
}

// Namer is implemented by a module that names its own tensors instead of
// having them named from its fields (see NamedParams): e.g. to give the
// keys of a PyTorch model, or to name tensors held in unexported fields.
// The names are relative to the module (its place in the tree is put
// before them) and must cover each of its parameters and buffers it wants
// saved; NamedParams does not look inside a Namer. (A struct that embeds a
// Namer is one too, by Go's method promotion: it then names its tensors
// through the embedded NamedTensors, and must override it to add its own.)
type Namer interface {
	NamedTensors() []Named
}

// leaf is a tensor reached by walking a module tree.
type leaf struct {
	name  string
	t     *core.Tensor
	owner reflect.Type // the struct whose field it is; nil in a slice or from a Namer
	field string
}

var (
	tensorType = reflect.TypeFor[*core.Tensor]()
	namerType  = reflect.TypeFor[Namer]()
	corePkg    = tensorType.Elem().PkgPath()
)

// walker collects the tensors of a module tree by reflection.
type walker struct {
	leaves []leaf
	seen   map[uintptr]map[reflect.Type]bool // pointers already walked: shared sub-modules, cycles
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// mayHold reports whether values of t can hold a *core.Tensor, so that
// the walk skips []float32 and the like without visiting their elements.
func mayHold(t reflect.Type, depth int) bool {
	if depth > 8 {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mayHold(t.Elem(), depth+1)
	case reflect.Map:
		return t.Key().Kind() == reflect.String && mayHold(t.Elem(), depth+1)
	case reflect.Interface, reflect.Struct:
		return true
	}
	return false
}

func (w *walker) walk(v reflect.Value, name string, owner reflect.Type, field string) {
	if !v.IsValid() {
		return
	}
	t := v.Type()
	if t == tensorType {
		if !v.IsNil() {
			w.leaves = append(w.leaves, leaf{name, v.Interface().(*core.Tensor), owner, field})
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return
		}
	}
	if t.Implements(namerType) && v.CanInterface() {
		for _, n := range v.Interface().(Namer).NamedTensors() {
			w.leaves = append(w.leaves, leaf{join(name, n.Name), n.Tensor, nil, ""})
		}
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		w.walk(v.Elem(), name, owner, field)
	case reflect.Pointer:
		if t.Elem().PkgPath() == corePkg || !mayHold(t, 0) {
			return // the device and the like: no module's tensors are inside
		}
		p := v.Pointer()
		if w.seen[p][t] {
			return
		}
		if w.seen[p] == nil {
			w.seen[p] = map[reflect.Type]bool{}
		}
		w.seen[p][t] = true
		w.walk(v.Elem(), name, owner, field)
	case reflect.Struct:
		if t.PkgPath() == corePkg {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || !mayHold(f.Type, 0) {
				continue
			}
			if f.Anonymous {
				w.walk(v.Field(i), name, t, "") // promoted, as Go promotes its fields
				continue
			}
			w.walk(v.Field(i), join(name, f.Name), t, f.Name)
		}
	case reflect.Slice, reflect.Array:
		if !mayHold(t.Elem(), 0) {
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i), join(name, strconv.Itoa(i)), nil, "")
		}
	case reflect.Map:
		if !mayHold(t, 0) {
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			w.walk(v.MapIndex(k), join(name, k.String()), nil, "")
		}
	}
}

// leaves walks m and returns the tensors it reaches, in walk order, by
// tensor: a tensor reached twice (tied weights) keeps its first name.
func leaves(m Module) ([]leaf, map[*core.Tensor]leaf) {
	w := &walker{seen: map[uintptr]map[reflect.Type]bool{}}
	w.walk(reflect.ValueOf(m), "", nil, "")
	by := map[*core.Tensor]leaf{}
	for _, l := range w.leaves {
		if _, ok := by[l.t]; !ok {
			by[l.t] = l
		}
	}
	return w.leaves, by
}

// named names ts (m's params or buffers, what) from the walk, dropping a
// tensor listed twice.
func named(fn string, m Module, by map[*core.Tensor]leaf, ts []*core.Tensor, what string, used map[string]*core.Tensor) ([]Named, error) {
	var out []Named
	done := map[*core.Tensor]bool{}
	for i, t := range ts {
		if t == nil {
			return nil, fmt.Errorf("nn.%s: %s %d of %T is nil", fn, what, i, m)
		}
		if done[t] {
			continue
		}
		done[t] = true
		l, ok := by[t]
		if !ok {
			return nil, fmt.Errorf("nn.%s: %s %d of %T (shape %v) is in no exported field of the module tree: name it with nn.Namer", fn, what, i, m, t.Shape())
		}
		if l.name == "" {
			return nil, fmt.Errorf("nn.%s: %s %d of %T (shape %v) has an empty name", fn, what, i, m, t.Shape())
		}
		if other, ok := used[l.name]; ok && other != t {
			return nil, fmt.Errorf("nn.%s: two tensors of %T are named %q (shapes %v and %v)", fn, m, l.name, other.Shape(), t.Shape())
		}
		used[l.name] = t
		out = append(out, Named{l.name, t})
	}
	return out, nil
}

// NamedParams names the distinct parameters of m, in m.Params() order,
// with dotted paths through the module tree, the analogue of PyTorch's
// state_dict keys. The rule:
//
//   - a struct's exported field adds its Go name as written ("Attn", "W");
//     an embedded field adds nothing (its fields are promoted, as in Go:
//     Checkpointed{Module: lin} names lin's "W");
//   - a slice or array element adds its index ("Blocks.0", and "0.W" for a
//     Sequential at the top); a map with string keys adds the key (sorted);
//   - pointers and interfaces are followed; unexported fields are not, nor
//     is anything of package core other than *core.Tensor;
//   - a module that implements Namer gives the names of its own tensors
//     (after its path), and is not looked into;
//   - a tensor reached twice (a shared module, tied weights) keeps the first
//     name the walk finds, fields in declaration order.
//
// The module's Params stays the truth: only tensors it lists are named, a
// tensor it lists twice once. A parameter the walk does not reach, or two
// parameters given the same name, is an error naming the parameter's index
// and shape. A GPT's are "Tok.W", "Pos.W", "Blocks.0.LN1.Gain", ...,
// "Blocks.0.Attn.Q.W", ..., "Head.B".
func NamedParams(m Module) ([]Named, error) {
	_, by := leaves(m)
	return named("NamedParams", m, by, m.Params(), "parameter", map[string]*core.Tensor{})
}

// NamedBuffers names the distinct buffers of m (see Buffered), in Buffers
// order, by NamedParams's rule: a BatchNorm's are "RunningMean" and
// "RunningVar" after its path.
func NamedBuffers(m Module) ([]Named, error) {
	_, by := leaves(m)
	return named("NamedBuffers", m, by, Buffers(m), "buffer", map[string]*core.Tensor{})
}

// NamedState is NamedParams then NamedBuffers: every tensor SaveSafetensors
// writes, each name unique across both.
func NamedState(m Module) ([]Named, error) {
	return namedState("NamedState", m)
}

func namedState(fn string, m Module) ([]Named, error) {
	_, by := leaves(m)
	used := map[string]*core.Tensor{}
	ps, err := named(fn, m, by, m.Params(), "parameter", used)
	if err != nil {
		return nil, err
	}
	var bufs []*core.Tensor
	params := m.Params()
	for _, b := range Buffers(m) {
		if !slices.Contains(params, b) {
			bufs = append(bufs, b)
		}
	}
	bs, err := named(fn, m, by, bufs, "buffer", used)
	if err != nil {
		return nil, err
	}
	return append(ps, bs...), nil
}
