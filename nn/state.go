package nn

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/ag-go/ag/core"
)

// State file format (version 1), little-endian:
//
//	magic   8 bytes  "AGSTATE1"
//	hlen    uint32   length of the header
//	header  hlen     JSON: {"version":1, "tensors":[{"name","shape"}...],
//	                 "optimizer":{"kind","step","hyper":{...}} (optional)}
//	data             the tensors' float32 values, in header order
//
// Tensors are the model's Params in order ("param.0", ...), then the
// optimizer's state ("adam.m.0", ..., "adam.v.0", ... or "sgd.vel.0", ...).
const stateMagic = "AGSTATE1"

// ErrStateMismatch is returned by LoadState when the file does not fit the
// model or optimizer; nothing has been overwritten then.
var ErrStateMismatch = errors.New("nn: state does not match")

type stateHeader struct {
	Version   int           `json:"version"`
	Tensors   []stateTensor `json:"tensors"`
	Optimizer *stateOpt     `json:"optimizer,omitempty"`
}

type stateTensor struct {
	Name  string `json:"name"`
	Shape []int  `json:"shape"`
}

type stateOpt struct {
	Kind  string             `json:"kind"`
	Step  int                `json:"step"`
	Hyper map[string]float64 `json:"hyper"`
}

func stateTensors(m Module, opt Optimizer) ([]*core.Tensor, []string, error) {
	ts := m.Params()
	names := make([]string, 0, len(ts))
	for i := range ts {
		names = append(names, fmt.Sprintf("param.%d", i))
	}
	if opt == nil {
		return ts, names, nil
	}
	st, err := opt.state()
	if err != nil {
		return nil, nil, err
	}
	n := len(opt.Params())
	for i := range st {
		switch opt.kind() {
		case "adam":
			names = append(names, fmt.Sprintf("adam.%s.%d", map[bool]string{true: "m", false: "v"}[i < n], i%n))
		default:
			names = append(names, fmt.Sprintf("%s.vel.%d", opt.kind(), i))
		}
	}
	return append(slices.Clone(ts), st...), names, nil
}

// SaveState writes the model's parameters and, when opt is not nil, the
// optimizer's state, step count and hyperparameters. It syncs the device.
func SaveState(w io.Writer, m Module, opt Optimizer) error {
	ts, names, err := stateTensors(m, opt)
	if err != nil {
		return fmt.Errorf("nn.SaveState: %w", err)
	}
	h := stateHeader{Version: 1}
	for i, t := range ts {
		h.Tensors = append(h.Tensors, stateTensor{names[i], t.Shape()})
	}
	if opt != nil {
		h.Optimizer = &stateOpt{opt.kind(), opt.steps(), opt.hyper()}
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
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("nn.SaveState: %w", err)
	}
	return nil
}

// LoadState reads a file written by SaveState into the model's parameters
// and, when opt is not nil, the optimizer. Everything is read and checked
// (tensor count, names, shapes, optimizer kind, the data's length) before
// anything is overwritten; a mismatch is ErrStateMismatch.
func LoadState(r io.Reader, m Module, opt Optimizer) error {
	ts, names, err := stateTensors(m, opt)
	if err != nil {
		return fmt.Errorf("nn.LoadState: %w", err)
	}
	br := bufio.NewReader(r)
	magic := make([]byte, len(stateMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != stateMagic {
		return fmt.Errorf("nn.LoadState: not an ag state file (magic %q): %w", magic, ErrStateMismatch)
	}
	var hlen uint32
	if err := binary.Read(br, binary.LittleEndian, &hlen); err != nil || hlen > 64<<20 {
		return fmt.Errorf("nn.LoadState: bad header length %d: %w", hlen, ErrStateMismatch)
	}
	hj := make([]byte, hlen)
	if _, err := io.ReadFull(br, hj); err != nil {
		return fmt.Errorf("nn.LoadState: reading header: %w", err)
	}
	var h stateHeader
	if err := json.Unmarshal(hj, &h); err != nil || h.Version != 1 {
		return fmt.Errorf("nn.LoadState: header (version %d): %v: %w", h.Version, err, ErrStateMismatch)
	}
	if (opt == nil) != (h.Optimizer == nil) || opt != nil && opt.kind() != h.Optimizer.Kind {
		return fmt.Errorf("nn.LoadState: file has optimizer %+v, loading into %v: %w", h.Optimizer, optKind(opt), ErrStateMismatch)
	}
	if len(h.Tensors) != len(ts) {
		return fmt.Errorf("nn.LoadState: file has %d tensors, the model (and optimizer) %d: %w", len(h.Tensors), len(ts), ErrStateMismatch)
	}
	for i, st := range h.Tensors {
		if st.Name != names[i] || !slices.Equal(st.Shape, ts[i].Shape()) {
			return fmt.Errorf("nn.LoadState: tensor %d is %s %v in the file, %s %v here: %w", i, st.Name, st.Shape, names[i], ts[i].Shape(), ErrStateMismatch)
		}
	}
	vals := make([][]float32, len(ts))
	raw := make([]byte, 4)
	for i, t := range ts {
		v := make([]float32, t.Len())
		for k := range v {
			if _, err := io.ReadFull(br, raw); err != nil {
				return fmt.Errorf("nn.LoadState: data of %s ends at value %d of %d: %w", names[i], k, len(v), ErrStateMismatch)
			}
			v[k] = math.Float32frombits(binary.LittleEndian.Uint32(raw))
		}
		vals[i] = v
	}
	for i, t := range ts {
		if err := t.WriteAt(0, vals[i]); err != nil {
			return fmt.Errorf("nn.LoadState: writing %s: %w", names[i], err)
		}
	}
	if opt != nil {
		opt.setSteps(h.Optimizer.Step)
		opt.setHyper(h.Optimizer.Hyper)
	}
	return nil
}

func optKind(o Optimizer) string {
	if o == nil {
		return "no optimizer"
	}
	return o.kind()
}
