package nn

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/ag-go/ag/core"
)

// State file format (version 1), little-endian:
//
//	magic   8 bytes  "AGSTATE1"
//	hlen    uint32   length of the header
//	header  hlen     JSON: {"version":1, "tensors":[{"name","shape"}...],
//	                 "optimizer":{"kind","step","hyper":{...}} (optional),
//	                 "schedule":{"kind","state":{...}} (optional)}
//	data             the tensors' float32 values, in header order
//
// Tensors are the model's Params in order ("param.0", ...), then its
// Buffers ("buffer.0", ...: running statistics; a model without buffers
// writes none, so its files are what they were before buffers existed),
// then the optimizer's state ("adam.m.0", ..., "adam.v.0", ... or "sgd.vel.0", ...).
// "hyper" holds exactly the optimizer's hyperparameters: adam lr, beta1,
// beta2, eps, weight_decay; sgd lr, momentum, weight_decay. "schedule"
// is written for a Scheduled optimizer with a State (a StatefulSchedule:
// ReduceLROnPlateau's "reduce_lr_on_plateau"), its values as strings of
// strconv's shortest float64 form, which round-trip exactly and spell the
// infinities JSON lacks ("+Inf"). The file ends with the data.
const stateMagic = "AGSTATE1"

// ErrStateMismatch is wrapped by every error of LoadState that refuses a
// file (it does not fit the model or optimizer, or it is malformed: then the
// error also wraps ErrStateCorrupt). Nothing has been changed then.
var ErrStateMismatch = errors.New("nn: state does not match")

// ErrStateCorrupt is wrapped by LoadState's errors for a file that is not a
// well-formed state file: bad magic, version or header, a hyperparameter
// missing or out of range, a negative step, data cut short or followed by
// more bytes. It unwraps to ErrStateMismatch, so a caller that only asks
// errors.Is(err, ErrStateMismatch) sees every refused file.
var ErrStateCorrupt error = stateCorrupt{}

type stateCorrupt struct{}

func (stateCorrupt) Error() string { return "nn: state file is corrupt" }
func (stateCorrupt) Unwrap() error { return ErrStateMismatch }

// corrupt is LoadState's error for a malformed file.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("nn.LoadState: "+format+": %w", append(args, ErrStateCorrupt)...)
}

type stateHeader struct {
	Version   int            `json:"version"`
	Tensors   []stateTensor  `json:"tensors"`
	Optimizer *stateOpt      `json:"optimizer,omitempty"`
	Schedule  *stateSchedule `json:"schedule,omitempty"`
}

type stateSchedule struct {
	Kind  string            `json:"kind"`
	State map[string]string `json:"state"`
}

// scheduleOf returns the StatefulSchedule of a Scheduled o (or of one it
// wraps), or nil.
func scheduleOf(o Optimizer) StatefulSchedule {
	s, ok := o.(*Scheduled)
	if !ok {
		return nil
	}
	if s.State != nil {
		return s.State
	}
	return scheduleOf(s.Optimizer)
}

// encodeSchedule is st's state as the file holds it.
func encodeSchedule(st StatefulSchedule) *stateSchedule {
	m := map[string]string{}
	for k, v := range st.ScheduleState() {
		m[k] = strconv.FormatFloat(v, 'g', -1, 64)
	}
	return &stateSchedule{st.ScheduleKind(), m}
}

// decodeSchedule checks the file's schedule against st (both absent, or
// the same kind with a state st accepts) and returns its values.
func decodeSchedule(h *stateSchedule, st StatefulSchedule) (map[string]float64, error) {
	switch {
	case h == nil && st == nil:
		return nil, nil
	case h == nil:
		return nil, fmt.Errorf("nn.LoadState: file has no schedule state, loading into a %s schedule: %w", st.ScheduleKind(), ErrStateMismatch)
	case st == nil:
		return nil, fmt.Errorf("nn.LoadState: file has a %q schedule state, loading into an optimizer without one (Scheduled.State): %w", h.Kind, ErrStateMismatch)
	case h.Kind != st.ScheduleKind():
		return nil, fmt.Errorf("nn.LoadState: file has a %q schedule state, loading into a %s schedule: %w", h.Kind, st.ScheduleKind(), ErrStateMismatch)
	}
	vals := map[string]float64{}
	for _, k := range slices.Sorted(maps.Keys(h.State)) {
		v, err := strconv.ParseFloat(h.State[k], 64)
		if err != nil {
			return nil, corrupt("schedule %q: value %q = %q is not a number", h.Kind, k, h.State[k])
		}
		vals[k] = v
	}
	if err := st.CheckScheduleState(vals); err != nil {
		return nil, corrupt("schedule %q: %v", h.Kind, err)
	}
	return vals, nil
}

type stateTensor struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

type stateOpt struct {
	Kind  string             `json:"kind"`
	Step  *int               `json:"step"` // a pointer, so that a missing step is an error, not 0
	Hyper map[string]float64 `json:"hyper"`
}

// stateLayout returns the names and shapes of the tensors a state file of
// m and opt holds, in file order: the parameters ("param.0", ...), the
// buffers ("buffer.0", ...), then the optimizer's state slot by slot ("adam.m.0", ..., "adam.v.0", ...). It
// touches no device memory, so a refused load allocates nothing;
// stateTensors returns the tensors themselves.
func stateLayout(fn string, m Module, opt Checkpointer) (names []string, shapes [][]int, err error) {
	bufs, err := buffersOf(fn, m)
	if err != nil {
		return nil, nil, err
	}
	for i, p := range m.Params() {
		names = append(names, fmt.Sprintf("param.%d", i))
		shapes = append(shapes, p.Shape())
	}
	for i, b := range bufs {
		names = append(names, fmt.Sprintf("buffer.%d", i))
		shapes = append(shapes, b.Shape())
	}
	if opt == nil {
		return names, shapes, nil
	}
	for _, slot := range opt.StateSlots() {
		for i, p := range opt.Params() {
			names = append(names, fmt.Sprintf("%s.%s.%d", opt.Kind(), slot, i))
			shapes = append(shapes, p.Shape())
		}
	}
	return names, shapes, nil
}

// stateTensors returns the tensors of stateLayout's entries, creating the
// optimizer's state (zeros, as its first Step would) if it has none yet.
func stateTensors(m Module, opt Checkpointer) ([]*core.Tensor, error) {
	bufs, err := buffersOf("", m)
	if err != nil {
		return nil, err
	}
	ts := append(slices.Clone(m.Params()), bufs...)
	if opt == nil {
		return ts, nil
	}
	st, err := opt.State()
	if err != nil {
		return nil, err
	}
	if want := len(opt.StateSlots()) * len(opt.Params()); len(st) != want {
		return nil, fmt.Errorf("%s optimizer: State returned %d tensors, want %d (%d slots x %d parameters)", opt.Kind(), len(st), want, len(opt.StateSlots()), len(opt.Params()))
	}
	return append(ts, st...), nil
}

// checkpointer returns opt as a Checkpointer (nil for no optimizer), or an
// error naming fn when it cannot be saved.
func checkpointer(fn string, opt Optimizer) (Checkpointer, error) {
	if opt == nil {
		return nil, nil
	}
	if s, ok := opt.(*Scheduled); ok {
		return checkpointer(fn, s.Optimizer) // a schedule's own state, if any, is Scheduled.State's
	}
	c, ok := opt.(Checkpointer)
	if !ok {
		return nil, fmt.Errorf("nn.%s: optimizer %T does not implement nn.Checkpointer, so its state cannot be saved or loaded", fn, opt)
	}
	return c, nil
}

// hyperRange checks one hyperparameter as the optimizer will use it (a
// float32): finite and in the range PyTorch's optimizers accept.
func hyperRange(key string, v float64) error {
	name := key
	if i := strings.IndexByte(key, '.'); i > 0 && strings.Trim(name[:i], "0123456789") == "" {
		name = name[i+1:] // a parameter group's ("0.lr"; see Groups)
	}
	f := float64(float32(v))
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("hyperparameter %q is %g, not a finite float32", key, v)
	}
	var ok bool
	var want string
	switch name {
	case "lr", "momentum", "weight_decay", "lr_decay", "initial_accumulator_value":
		ok, want = f >= 0, ">= 0"
	case "beta1", "beta2", "alpha":
		ok, want = f >= 0 && f < 1, "in [0, 1)"
	case "nesterov", "amsgrad", "centered", "l2": // flags, present only when on
		ok, want = f == 1, "1 (on)"
	case "eps":
		ok, want = f > 0, "> 0 as a float32"
	default:
		return fmt.Errorf("hyperparameter %q has no known range", key) // a new hyperparameter needs a case here
	}
	if !ok {
		return fmt.Errorf("hyperparameter %q is %g, want %s", key, v, want)
	}
	return nil
}

// checkHyper checks that h holds exactly opt's hyperparameters, each in
// range; errors list names in sorted order so they are deterministic.
func checkHyper(opt Checkpointer, h map[string]float64) error {
	want := opt.Hyperparameters()
	if hyperOK(h, want) {
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(h)) {
		if _, ok := want[name]; !ok {
			return fmt.Errorf("unknown hyperparameter %q for %s", name, opt.Kind())
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		v, ok := h[name]
		if !ok {
			return fmt.Errorf("hyperparameter %q of %s is missing", name, opt.Kind())
		}
		if err := hyperRange(name, v); err != nil {
			return err
		}
	}
	return nil
}

// hyperOK is checkHyper's answer when it is yes, without the sorted walks
// that name the first problem: every optimizer step asks it.
func hyperOK(h, want map[string]float64) bool {
	if len(h) != len(want) {
		return false
	}
	for name, v := range h {
		if _, ok := want[name]; !ok || hyperRange(name, v) != nil {
			return false
		}
	}
	return true
}

// SaveState writes the model's parameters and buffers (see Buffered) and,
// when opt is not nil, the optimizer's state, step count and
// hyperparameters, and the state of its schedule where that is more than
// the step count (Scheduled.State: WithReduceLROnPlateau). It syncs the
// device.
// It refuses hyperparameters LoadState would refuse (NaN, a negative LR,
// ...), so that every file it writes can be loaded.
func SaveState(w io.Writer, m Module, o Optimizer) error {
	opt, err := checkpointer("SaveState", o)
	if err != nil {
		return err
	}
	names, _, err := stateLayout("SaveState", m, opt)
	if err != nil {
		return err
	}
	ts, err := stateTensors(m, opt)
	if err != nil {
		return fmt.Errorf("nn.SaveState: %w", err)
	}
	h := stateHeader{Version: 1}
	for i, t := range ts {
		h.Tensors = append(h.Tensors, stateTensor{names[i], t.Shape()})
	}
	if opt != nil {
		hyper := opt.Hyperparameters()
		if err := checkHyper(opt, hyper); err != nil {
			return fmt.Errorf("nn.SaveState: %w", err)
		}
		step := opt.StepCount()
		h.Optimizer = &stateOpt{opt.Kind(), &step, hyper}
	}
	if st := scheduleOf(o); st != nil {
		h.Schedule = encodeSchedule(st)
	}
	hj, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("nn.SaveState: %w", err)
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(stateMagic)
	binary.Write(bw, binary.LittleEndian, uint32(len(hj)))
	bw.Write(hj)
	buf := make([]byte, 0, 1<<16)
	for i, t := range ts {
		v, err := t.Data()
		if err != nil {
			return fmt.Errorf("nn.SaveState: reading %s: %w", names[i], err)
		}
		for _, x := range v {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(x))
			if len(buf) == cap(buf) {
				bw.Write(buf)
				buf = buf[:0]
			}
		}
		bw.Write(buf)
		buf = buf[:0]
	}
	if err := bw.Flush(); err != nil { // bufio keeps the first write error
		return fmt.Errorf("nn.SaveState: %w", err)
	}
	return nil
}

// LoadState reads a file written by SaveState into the model's parameters
// and buffers and, when opt is not nil, the optimizer (state, step count and
// hyperparameters) and its schedule's state (Scheduled.State, which the
// file must have exactly when opt has one). It reads r to its end.
//
// Everything is checked before anything is changed: the magic, the version,
// the header's length (bounded by what the model's header can take, before
// allocating) and its JSON (no unknown fields), every tensor's name and
// shape against the model and optimizer, the optimizer's kind, a step >= 0,
// every hyperparameter present, finite and in range (lr, momentum,
// weight_decay >= 0; betas in [0, 1); eps > 0), the data's exact length and
// no byte after it. A refused file is an error wrapping ErrStateMismatch
// (and ErrStateCorrupt when the file is malformed) naming the field and its
// value; an error reading r is returned wrapped as it is. If writing to the
// device fails part-way, the tensors already written are restored. The one
// trace a refused load may leave is an optimizer's state created as zeros,
// which is what its first Step would create.
//
// Values are loaded bit for bit, NaN and Inf included (as PyTorch does): a
// checkpoint of a run that diverged is still a faithful record of it.
func LoadState(r io.Reader, m Module, o Optimizer) error {
	opt, err := checkpointer("LoadState", o)
	if err != nil {
		return err
	}
	names, shapes, err := stateLayout("LoadState", m, opt)
	if err != nil {
		return err
	}
	br := bufio.NewReader(r)
	h, err := readHeader(br, names)
	if err != nil {
		return err
	}
	if err := checkHeader(h, names, shapes, opt); err != nil {
		return err
	}
	sched, err := decodeSchedule(h.Schedule, scheduleOf(o))
	if err != nil {
		return err
	}
	vals, err := readData(br, names, shapes)
	if err != nil {
		return err
	}
	ts, err := stateTensors(m, opt)
	if err != nil {
		return fmt.Errorf("nn.LoadState: %w", err)
	}
	dst := make([]stateValue, len(ts))
	for i, t := range ts {
		dst[i] = t
	}
	if err := writeAll("LoadState", dst, vals, names); err != nil {
		return err
	}
	if opt != nil {
		opt.SetStepCount(*h.Optimizer.Step)
		opt.SetHyperparameters(h.Optimizer.Hyper)
	}
	if sched != nil {
		if err := scheduleOf(o).SetScheduleState(sched); err != nil {
			return fmt.Errorf("nn.LoadState: %w", err) // checked above: a StatefulSchedule that changed its mind
		}
	}
	return nil
}

// maxHeader bounds the header of a file for the given tensors: SaveState
// writes about 40 bytes per tensor plus 12 per dimension and under 200 for
// the optimizer; this allows several times that, so a corrupt length
// cannot make LoadState allocate more than a few KB per tensor.
func maxHeader(names []string) int {
	n := 4096
	for _, name := range names {
		n += 256 + len(name)
	}
	return n
}

// readFull reads len(buf) bytes of what; a file that ends first is corrupt.
func readFull(br *bufio.Reader, buf []byte, what string) error {
	n, err := io.ReadFull(br, buf)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return corrupt("file ends in the %s (%d of %d bytes)", what, n, len(buf))
	default:
		return fmt.Errorf("nn.LoadState: reading the %s: %w", what, err)
	}
}

// readHeader reads and decodes the magic, the header length and the header.
func readHeader(br *bufio.Reader, names []string) (*stateHeader, error) {
	magic := make([]byte, len(stateMagic))
	if err := readFull(br, magic, "magic"); err != nil {
		return nil, err
	}
	if string(magic) != stateMagic {
		return nil, corrupt("not an ag state file (magic %q, want %q)", magic, stateMagic)
	}
	var hl [4]byte
	if err := readFull(br, hl[:], "header length"); err != nil {
		return nil, err
	}
	hlen := int64(binary.LittleEndian.Uint32(hl[:]))
	if limit := maxHeader(names); hlen < 2 || hlen > int64(limit) {
		return nil, corrupt("header length %d outside [2, %d] (the bound for %d tensors)", hlen, limit, len(names))
	}
	hj := make([]byte, hlen)
	if err := readFull(br, hj, "header"); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(hj))
	dec.DisallowUnknownFields()
	var h stateHeader
	if err := dec.Decode(&h); err != nil {
		return nil, corrupt("header: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, corrupt("header: more after its JSON object (at byte %d of %d)", dec.InputOffset(), hlen)
	}
	if h.Version != 1 {
		return nil, corrupt("header: version %d, want 1", h.Version)
	}
	return &h, nil
}

// checkHeader checks the header against the model and optimizer.
func checkHeader(h *stateHeader, names []string, shapes [][]int, opt Checkpointer) error {
	if o := h.Optimizer; o != nil {
		if o.Step == nil {
			return corrupt("optimizer %q: step missing", o.Kind)
		}
		if *o.Step < 0 {
			return corrupt("optimizer %q: step %d, want >= 0", o.Kind, *o.Step)
		}
	}
	if (opt == nil) != (h.Optimizer == nil) || opt != nil && opt.Kind() != h.Optimizer.Kind {
		file := "no optimizer"
		if h.Optimizer != nil {
			file = fmt.Sprintf("optimizer %q", h.Optimizer.Kind)
		}
		return fmt.Errorf("nn.LoadState: file has %s, loading into %s: %w", file, optKind(opt), ErrStateMismatch)
	}
	if opt != nil {
		if err := checkHyper(opt, h.Optimizer.Hyper); err != nil {
			return corrupt("optimizer: %v", err)
		}
	}
	if len(h.Tensors) != len(names) {
		why := ""
		if nb := countPrefix(names, "buffer."); nb > 0 && len(h.Tensors) == len(names)-nb && countPrefix(stateNames(h), "buffer.") == 0 {
			// a file of a model whose buffers SaveState did not find before
			// it walked struct fields: loading it would keep fresh statistics
			why = fmt.Sprintf(" (the file is without the model's %d buffers, e.g. BatchNorm's running statistics)", nb)
		}
		return fmt.Errorf("nn.LoadState: file has %d tensors, the model (parameters and buffers) and optimizer %d%s: %w", len(h.Tensors), len(names), why, ErrStateMismatch)
	}
	for i, st := range h.Tensors {
		if st.Name != names[i] || !slices.Equal(st.Shape, shapes[i]) {
			return fmt.Errorf("nn.LoadState: tensor %d is %q %v in the file, %q %v here: %w", i, st.Name, st.Shape, names[i], shapes[i], ErrStateMismatch)
		}
	}
	return nil
}

// readData reads every tensor's values, then checks that the file ends.
// Its allocations are bounded by the model's size, not by the file.
func readData(br *bufio.Reader, names []string, shapes [][]int) ([][]float32, error) {
	vals := make([][]float32, len(names))
	raw := make([]byte, 1<<16)
	for i := range names {
		v := make([]float32, numElems(shapes[i]))
		for k := 0; k < len(v); {
			chunk := raw[:4*min(len(v)-k, len(raw)/4)]
			if err := readFull(br, chunk, fmt.Sprintf("data of %s (from value %d of %d)", names[i], k, len(v))); err != nil {
				return nil, err
			}
			for j := 0; j < len(chunk); j += 4 {
				v[k] = math.Float32frombits(binary.LittleEndian.Uint32(chunk[j:]))
				k++
			}
		}
		vals[i] = v
	}
	switch n, err := br.Discard(1); {
	case n == 1:
		return nil, corrupt("bytes after the data of %d tensors", len(names))
	case err != io.EOF:
		return nil, fmt.Errorf("nn.LoadState: reading past the data: %w", err)
	}
	return vals, nil
}

// stateValue is what writeAll needs of a tensor (a *core.Tensor; tests
// pass one that fails).
type stateValue interface {
	Data() ([]float32, error)
	WriteAt(off int, data []float32) error
}

// writeAll writes every tensor, or none: when a write fails, the tensors
// already written get their previous values back.
func writeAll(fn string, ts []stateValue, vals [][]float32, names []string) error {
	old := make([][]float32, len(ts))
	for i, t := range ts {
		v, err := t.Data()
		if err != nil {
			return fmt.Errorf("nn."+fn+": reading %s before overwriting it: %w", names[i], err)
		}
		old[i] = v
	}
	for i, t := range ts {
		if err := t.WriteAt(0, vals[i]); err != nil {
			for j := range i {
				if rerr := ts[j].WriteAt(0, old[j]); rerr != nil {
					return fmt.Errorf("nn."+fn+": writing %s: %w (and restoring %s failed: %v; the model is partly loaded)", names[i], err, names[j], rerr)
				}
			}
			return fmt.Errorf("nn."+fn+": writing %s: %w", names[i], err)
		}
	}
	return nil
}

func countPrefix(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func stateNames(h *stateHeader) []string {
	out := make([]string, len(h.Tensors))
	for i, t := range h.Tensors {
		out[i] = t.Name
	}
	return out
}

func numElems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

func optKind(o Checkpointer) string {
	if o == nil {
		return "no optimizer"
	}
	return o.Kind()
}
