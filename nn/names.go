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
	tensorType    = reflect.TypeFor[*core.Tensor]()
	namerType     = reflect.TypeFor[Namer]()
	trainableType = reflect.TypeFor[Trainable]()
	bufferedType  = reflect.TypeFor[Buffered]()
	corePkg       = tensorType.Elem().PkgPath()
)

// place is where the walk is in a module tree.
type place struct {
	name  string       // the dotted path, as NamedParams names
	owner reflect.Type // the struct whose field it is; nil in a slice, a map or at the top
	field string
}

// walker walks a module tree by reflection, the one walk behind names
// (NamedParams), buffers (Buffers) and modes (SetTraining): exported
// struct fields (an embedded one adds no name), slice and array elements,
// the values of maps with string keys (sorted), pointers and interfaces,
// each pointer once (shared sub-modules, cycles). At each value it asks
// take, which may take the value whole: the walk does not look inside.
//
// With hidden set (the interface take looks for), a value the walk cannot
// reach that hidden would take is an error rather than skipped: one in an
// unexported field of a struct the walk looks into (take did not take
// it), or in a map whose keys are not strings.
type walker struct {
	take   func(v reflect.Value, at place) bool
	hidden reflect.Type
	what   string // what hidden is, for errors: "modes (nn.Trainable)"
	seen   map[uintptr]map[reflect.Type]bool
}

// walkError is a module tree that a walk refuses. Buffers and SetTraining
// panic with it (a container's own Buffers or SetTraining calls them for
// its children); the functions that return errors recover it, and each
// names itself as fn.
type walkError struct{ fn, msg string }

func (e *walkError) Error() string {
	if e.fn == "" {
		return e.msg
	}
	return "nn." + e.fn + ": " + e.msg
}

// caught turns a walkError panicked inside f into an error of fn; other
// panics go on.
func caught(fn string, f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			we, ok := r.(*walkError)
			if !ok {
				panic(r)
			}
			err = &walkError{fn, we.msg}
		}
	}()
	f()
	return nil
}

func newWalker(take func(reflect.Value, place) bool, hidden reflect.Type, what string) *walker {
	return &walker{take: take, hidden: hidden, what: what, seen: map[uintptr]map[reflect.Type]bool{}}
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

// mayRef is mayHold for holds, which looks into every map.
func mayRef(t reflect.Type, depth int) bool {
	if depth > 8 {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
		return mayRef(t.Elem(), depth+1)
	case reflect.Interface, reflect.Struct:
		return true
	}
	return false
}

// implementer returns v as a value of a type that implements iface: v
// itself, or its address when only the pointer's methods do (a BatchNorm
// held by value in a struct reached through a pointer). ok is false when
// neither implements it; then or when v cannot be addressed, u is not
// valid.
func implementer(v reflect.Value, iface reflect.Type) (u reflect.Value, ok bool) {
	t := v.Type()
	if t.Implements(iface) {
		return v, true
	}
	if t.Kind() != reflect.Interface && t.Kind() != reflect.Pointer && reflect.PointerTo(t).Implements(iface) {
		if v.CanAddr() {
			return v.Addr(), true
		}
		return reflect.Value{}, true
	}
	return reflect.Value{}, false
}

func (w *walker) walk(v reflect.Value, at place) {
	if !v.IsValid() {
		return
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return
		}
	}
	if t.Kind() == reflect.Pointer {
		if t != tensorType && t.Elem().PkgPath() == corePkg {
			return // the device and the like: no module's tensors are inside
		}
		if !mayHold(t, 0) {
			w.refuseHidden(v, func(found reflect.Type) string { return w.oddMap(at, found) }, nil)
			return
		}
		p := v.Pointer()
		if w.seen[p][t] {
			return
		}
		if w.seen[p] == nil {
			w.seen[p] = map[reflect.Type]bool{}
		}
		w.seen[p][t] = true
	}
	if w.take(v, at) {
		return
	}
	switch t.Kind() {
	case reflect.Interface:
		w.walk(v.Elem(), at)
	case reflect.Pointer:
		w.walk(v.Elem(), at)
	case reflect.Struct:
		if t.PkgPath() == corePkg {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() && !(f.Anonymous && isStruct(f.Type)) {
				w.refuseHidden(v.Field(i), func(found reflect.Type) string {
					return fmt.Sprintf("%s's unexported field %s holds a %v, which has %s", ownerName(v, at), f.Name, found, w.what)
				}, t)
				continue
			}
			if !mayHold(f.Type, 0) {
				w.refuseHidden(v.Field(i), func(found reflect.Type) string { return w.oddMap(place{join(at.name, f.Name), t, f.Name}, found) }, nil)
				continue
			}
			if f.Anonymous {
				w.walk(v.Field(i), place{at.name, t, ""}) // promoted, as Go promotes its fields
				continue
			}
			w.walk(v.Field(i), place{join(at.name, f.Name), t, f.Name})
		}
	case reflect.Slice, reflect.Array:
		if !mayHold(t.Elem(), 0) {
			w.refuseHidden(v, func(found reflect.Type) string { return w.oddMap(at, found) }, nil)
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i), place{join(at.name, strconv.Itoa(i)), nil, ""})
		}
	case reflect.Map:
		if !mayHold(t, 0) {
			w.refuseHidden(v, func(found reflect.Type) string { return w.oddMap(at, found) }, nil)
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			w.walk(v.MapIndex(k), place{join(at.name, k.String()), nil, ""})
		}
	}
}

// oddMap is the error for a value the walk does not look into because
// of a map whose keys are not strings (mayHold), holding a found.
func (w *walker) oddMap(at place, found reflect.Type) string {
	return fmt.Sprintf("%s holds a %v, which has %s, in a map whose keys are not strings: only maps with string keys are walked (they name the path)", where(at), found, w.what)
}

// isStruct reports whether t is a struct or a pointer to one: an embedded
// field of such a type promotes its exported fields even when the type is
// unexported, so the walk follows it as Go does (and as encoding/json).
func isStruct(t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Kind() == reflect.Struct
}

// where is at for an error: the field and its struct, or the path.
func where(at place) string {
	if at.owner != nil && at.field != "" {
		return fmt.Sprintf("field %s of %v (at %q)", at.field, at.owner, at.name)
	}
	return placeName(at)
}

// refuseHidden panics with a walkError, its message from msg, when v
// holds a value of w.hidden's interface: the walk cannot reach it, and
// skipping it would be silent. owner, when not nil, is the struct that
// could take the job itself.
func (w *walker) refuseHidden(v reflect.Value, msg func(found reflect.Type) string, owner reflect.Type) {
	if w.hidden == nil {
		return
	}
	found := holds(v, w.hidden, map[uintptr]bool{}, 0)
	if found == nil {
		return
	}
	m := msg(found)
	if owner != nil {
		m += fmt.Sprintf(": the walk over exported fields cannot reach it; export the field, or implement %v on *%v to pass it on yourself", w.hidden, owner)
	}
	panic(&walkError{"", m})
}

// ownerName is the struct v's type for an error, as a pointer when the
// walk came through one (the type a user's methods are on).
func ownerName(v reflect.Value, at place) string {
	if v.CanAddr() {
		return "*" + v.Type().String()
	}
	return v.Type().String()
}

// placeName is at's path for an error ("the module" at the top).
func placeName(at place) string {
	if at.name == "" {
		return "the module"
	}
	return fmt.Sprintf("%q", at.name)
}

// holds returns the type of a value inside v (v included, through every
// field, exported or not) that implements iface, or nil when there is
// none. A nil pointer holds nothing.
func holds(v reflect.Value, iface reflect.Type, seen map[uintptr]bool, depth int) reflect.Type {
	if !v.IsValid() || depth > 32 {
		return nil
	}
	t := v.Type()
	switch t.Kind() {
	case reflect.Interface, reflect.Pointer, reflect.Map, reflect.Slice:
		if v.IsNil() {
			return nil
		}
	}
	if t.PkgPath() == corePkg || t.Kind() == reflect.Pointer && t.Elem().PkgPath() == corePkg {
		return nil
	}
	if _, ok := implementer(v, iface); ok {
		return t
	}
	switch t.Kind() {
	case reflect.Interface:
		return holds(v.Elem(), iface, seen, depth+1)
	case reflect.Pointer:
		if seen[v.Pointer()] {
			return nil
		}
		seen[v.Pointer()] = true
		return holds(v.Elem(), iface, seen, depth+1)
	case reflect.Struct:
		for i := range t.NumField() {
			if found := holds(v.Field(i), iface, seen, depth+1); found != nil {
				return found
			}
		}
	case reflect.Slice, reflect.Array:
		if !mayRef(t.Elem(), 0) {
			return nil
		}
		for i := range v.Len() {
			if found := holds(v.Index(i), iface, seen, depth+1); found != nil {
				return found
			}
		}
	case reflect.Map:
		if !mayRef(t.Elem(), 0) {
			return nil
		}
		it := v.MapRange()
		for it.Next() {
			if found := holds(it.Value(), iface, seen, depth+1); found != nil {
				return found
			}
		}
	}
	return nil
}

// leaves walks m and returns its tensors by tensor, each with the first
// name the walk finds (tied weights are reached twice).
func leaves(m Module) map[*core.Tensor]leaf {
	by := map[*core.Tensor]leaf{}
	add := func(l leaf) {
		if _, ok := by[l.t]; !ok {
			by[l.t] = l
		}
	}
	w := newWalker(func(v reflect.Value, at place) bool {
		t := v.Type()
		if t == tensorType {
			add(leaf{at.name, v.Interface().(*core.Tensor), at.owner, at.field})
			return true
		}
		if t.Implements(namerType) && v.CanInterface() {
			for _, n := range v.Interface().(Namer).NamedTensors() {
				add(leaf{join(at.name, n.Name), n.Tensor, nil, ""})
			}
			return true
		}
		return false
	}, nil, "")
	w.walk(reflect.ValueOf(m), place{})
	return by
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
//   - pointers and interfaces are followed; unexported fields are not
//     (but an embedded struct's exported fields are, as Go promotes them
//     even from an unexported type), nor is anything of package core
//     other than *core.Tensor;
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
	by := leaves(m)
	return named("NamedParams", m, by, m.Params(), "parameter", map[string]*core.Tensor{})
}

// NamedBuffers names the distinct buffers of m (see Buffered), in Buffers
// order, by NamedParams's rule: a BatchNorm's are "RunningMean" and
// "RunningVar" after its path.
func NamedBuffers(m Module) ([]Named, error) {
	bs, err := buffersOf("NamedBuffers", m)
	if err != nil {
		return nil, err
	}
	return named("NamedBuffers", m, leaves(m), bs, "buffer", map[string]*core.Tensor{})
}

// NamedState is NamedParams then NamedBuffers: every tensor SaveSafetensors
// writes, each name unique across both.
func NamedState(m Module) ([]Named, error) {
	return namedState("NamedState", m)
}

func namedState(fn string, m Module) ([]Named, error) {
	all, err := buffersOf(fn, m)
	if err != nil {
		return nil, err
	}
	by := leaves(m)
	used := map[string]*core.Tensor{}
	ps, err := named(fn, m, by, m.Params(), "parameter", used)
	if err != nil {
		return nil, err
	}
	var bufs []*core.Tensor
	params := m.Params()
	for _, b := range all {
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
