package backend

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

// Key tells apart graphs that differ in any field a compiled program
// depends on, and matches graphs that differ in nothing.
func TestGraphKey(t *testing.T) {
	base := func() *Graph {
		return &Graph{
			Nodes: []Node{
				{Op: OpArg, Shape: []int{2, 3}, Arg: 0},
				{Op: OpArg, Shape: []int{3, 4}, Arg: 1},
				{Op: OpMatMul, In: []int{0, 1}, Shape: []int{2, 4}},
				{Op: OpAffine, In: []int{2}, Shape: []int{2, 4}, A: 2, B: 0.5},
				{Op: OpPermute, In: []int{3}, Shape: []int{4, 2}, Perm: []int{1, 0}},
			},
			Outputs: []Output{{Node: 4, Arg: 2}},
			NumArgs: 3,
		}
	}
	if base().Key() != base().Key() {
		t.Fatal("equal graphs have different keys")
	}
	changes := map[string]func(g *Graph){
		"op":      func(g *Graph) { g.Nodes[3].Op = OpClamp },
		"input":   func(g *Graph) { g.Nodes[2].In = []int{1, 0} },
		"shape":   func(g *Graph) { g.Nodes[0].Shape = []int{3, 2} },
		"arg":     func(g *Graph) { g.Nodes[1].Arg = 2 },
		"scalar":  func(g *Graph) { g.Nodes[3].B = 0.25 },
		"neg0":    func(g *Graph) { g.Nodes[3].B = 0; g.Nodes[3].A = 2 },
		"perm":    func(g *Graph) { g.Nodes[4].Perm = []int{0, 1} },
		"transA":  func(g *Graph) { g.Nodes[2].TransA = true },
		"transB":  func(g *Graph) { g.Nodes[2].TransB = true },
		"axis":    func(g *Graph) { g.Nodes[3].Axis = 1 },
		"start":   func(g *Graph) { g.Nodes[3].Start = 1 },
		"output":  func(g *Graph) { g.Outputs[0].Arg = 1 },
		"outputs": func(g *Graph) { g.Outputs = append(g.Outputs, Output{Node: 2, Arg: 1}) },
		"numargs": func(g *Graph) { g.NumArgs = 4 },
	}
	seen := map[string]string{base().Key(): "base"}
	for name, change := range changes {
		g := base()
		change(g)
		k := g.Key()
		if prev, dup := seen[k]; dup {
			t.Errorf("change %q gives the same key as %q", name, prev)
		}
		seen[k] = name
	}
}

// Validate rejects the scalar attributes whose special values ir.go leaves
// undefined, naming them, and accepts the infinite ones it defines.
func TestValidateScalars(t *testing.T) {
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	cases := []struct {
		op   Op
		a, b float32
		want string // "" when valid
	}{
		{OpPowConst, 2.5, 0, ""},
		{OpPowConst, inf, 0, "exponent +Inf is not finite"},
		{OpPowConst, -inf, 0, "exponent -Inf is not finite"},
		{OpPowConst, nan, 0, "exponent NaN is not finite"},
		{OpClamp, -inf, inf, ""},
		{OpClamp, 2, 2, ""},
		{OpClamp, 3, 2, "clamp bounds 3 > 2"},
		{OpClamp, nan, 2, "clamp bounds NaN > 2"},
		{OpInside, inf, -inf, ""}, // an empty interval: the mask is 0
		{OpAffine, inf, nan, ""},  // IEEE arithmetic defines every value
	}
	for _, c := range cases {
		g := &Graph{NumArgs: 1, Nodes: []Node{
			{Op: OpArg, Shape: []int{3}},
			{Op: c.op, In: []int{0}, Shape: []int{3}, A: c.a, B: c.b},
		}}
		err := g.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v(%g, %g): %v", c.op, c.a, c.b, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v(%g, %g): error %v, want one containing %q", c.op, c.a, c.b, err, c.want)
		}
	}
}

// Validate keeps packed words opaque: only an unpack of their format reads
// a pack's result, and shapes must be the packed length.
func TestValidatePacks(t *testing.T) {
	arg := Node{Op: OpArg, Shape: []int{5}}
	cases := []struct {
		name  string
		nodes []Node
		want  string // "" when valid
	}{
		{"roundtrip", []Node{arg, {Op: OpPackF16, In: []int{0}, Shape: []int{3}}, {Op: OpUnpackF16, In: []int{1}, Shape: []int{5}}}, ""},
		{"arg words", []Node{{Op: OpArg, Shape: []int{3}}, {Op: OpUnpackBF16, In: []int{0}, Shape: []int{1, 5}}}, ""},
		{"short", []Node{arg, {Op: OpPackF16, In: []int{0}, Shape: []int{2}}}, "packs into [3] words"},
		{"rank", []Node{arg, {Op: OpPackBF16, In: []int{0}, Shape: []int{3, 1}}}, "packs into [3] words"},
		{"unpack size", []Node{{Op: OpArg, Shape: []int{3}}, {Op: OpUnpackF16, In: []int{0}, Shape: []int{7}}}, "unpacks from [4] words"},
		{"read as f32", []Node{arg, {Op: OpPackF16, In: []int{0}, Shape: []int{3}}, {Op: OpNeg, In: []int{1}, Shape: []int{3}}}, "only unpack_f16 reads them"},
		{"other format", []Node{arg, {Op: OpPackF16, In: []int{0}, Shape: []int{3}}, {Op: OpUnpackBF16, In: []int{1}, Shape: []int{5}}}, "only unpack_f16 reads them"},
		{"not words", []Node{arg, {Op: OpSliceRows, In: []int{0}, Shape: []int{3}}, {Op: OpUnpackF16, In: []int{1}, Shape: []int{5}}}, "want an arg, a pack_f16 or a get_rows of an arg's words"},
	}
	for _, c := range cases {
		g := &Graph{NumArgs: 1, Nodes: c.nodes}
		err := g.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// A 16-bit table: an arg of [rows, words] gathered by get_rows and read
// back by the rows form of an unpack. The gathered words stay opaque: only
// unpacks of one format read them, and they never leave the run.
func TestValidateWordRows(t *testing.T) {
	tab := Node{Op: OpArg, Arg: 0, Shape: []int{10, 4}} // records of 7 or 8 values
	idx := Node{Op: OpArg, Arg: 1, Shape: []int{3}}
	gather := Node{Op: OpGetRows, In: []int{0, 1}, Shape: []int{3, 4}}
	unpack := func(op Op, shape ...int) Node { return Node{Op: op, In: []int{2}, Shape: shape} }
	cases := []struct {
		name    string
		nodes   []Node
		outputs []Output
		want    string // "" when valid
	}{
		{"odd width", []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 7)}, nil, ""},
		{"even width", []Node{tab, idx, gather, unpack(OpUnpackBF16, 3, 8)}, nil, ""},
		{"two readers", []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 7), unpack(OpUnpackF16, 3, 8)}, nil, ""},
		{"whole table", []Node{tab, {Op: OpUnpackF16, In: []int{0}, Shape: []int{10, 7}}}, nil, ""},
		{"gather then f32 op", []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 8), {Op: OpNeg, In: []int{2}, Shape: []int{3, 4}}}, nil,
			"reads the packed words that node 2 (get_rows) gathers: only unpack_f16 reads them"},
		{"two formats", []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 8), unpack(OpUnpackBF16, 3, 8)}, nil,
			"only unpack_f16 reads them"},
		{"words as output", []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 8)}, []Output{{Node: 2, Arg: 1}},
			"output of node 2, a get_rows of packed words: only unpack_f16 reads them"},
		{"width", []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 9)}, nil, "rows of 4 words unpack to [3, 7] or [3, 8]"},
		{"rows", []Node{tab, idx, gather, unpack(OpUnpackF16, 4, 8)}, nil, "rows of 4 words unpack to [3, 7] or [3, 8]"},
		{"flat", []Node{tab, idx, gather, unpack(OpUnpackF16, 24)}, nil, "rows of 4 words unpack to"},
		{"rank 3 words", []Node{{Op: OpArg, Shape: []int{2, 2, 2}}, {Op: OpUnpackF16, In: []int{0}, Shape: []int{2, 2, 4}}}, nil,
			"words are [n] (flat) or [rows, words per row]"},
		{"table not an arg", []Node{tab, idx, {Op: OpNeg, In: []int{0}, Shape: []int{10, 4}}, {Op: OpGetRows, In: []int{2, 1}, Shape: []int{3, 4}},
			{Op: OpUnpackF16, In: []int{3}, Shape: []int{3, 8}}}, nil, "the table must be an arg of shape [rows, words]"},
		{"flat table", []Node{{Op: OpArg, Arg: 0, Shape: []int{10}}, idx, {Op: OpGetRows, In: []int{0, 1}, Shape: []int{3}},
			{Op: OpUnpackF16, In: []int{2}, Shape: []int{6}}}, nil, "the table must be an arg of shape [rows, words]"},
	}
	for _, c := range cases {
		g := &Graph{NumArgs: 2, Nodes: c.nodes, Outputs: c.outputs}
		err := g.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
	g := &Graph{NumArgs: 2, Nodes: []Node{tab, idx, gather, unpack(OpUnpackF16, 3, 7), {Op: OpGetRows, In: []int{0, 1}, Shape: []int{3, 4}}}}
	if got := g.WordGathers(); !slices.Equal(got, []bool{false, false, true, false, false}) {
		t.Errorf("WordGathers = %v: only node 2 gathers words", got)
	}
}

// TestElementwiseRows checks that every elementwise op is defined by its
// row (F64, F32 and WGSL, which the reference, cpu and WebGPU read in
// place of a case per op) and that no other op has those fields, and that
// the row's float64 and f32 definitions agree on a few values.
func TestElementwiseRows(t *testing.T) {
	for _, op := range Ops() {
		info := op.Info()
		elem := op.IsUnary() || op.IsBinary()
		if has := [3]bool{info.F64 != nil, info.F32 != nil, info.WGSL != ""}; has != [3]bool{elem, elem, elem} {
			t.Errorf("%v (class %d): F64, F32, WGSL set %v, want all %t", op, info.Class, has, elem)
			continue
		}
		if !elem {
			continue
		}
		for _, x := range []float32{-2, -0.75, 0.25, 1, 3} {
			want := info.F64(float64(x), 1.5, 0.5, 2)
			got := info.F32(x, 1.5, 0.5, 2)
			if math.Abs(float64(got)-want) > 1e-6*max(1, math.Abs(want)) {
				t.Errorf("%v(%g): F32 %g, F64 %g", op, x, got, want)
			}
		}
	}
}

// Validate refuses one_hot and cross_entropy over more classes than f32
// indices name exactly (MaxClasses), naming the count; up to it they pass.
func TestValidateClasses(t *testing.T) {
	for _, c := range []int{MaxClasses, MaxClasses + 1} {
		graphs := map[string]*Graph{
			"one_hot": {NumArgs: 1, Nodes: []Node{
				{Op: OpArg, Shape: []int{2}},
				{Op: OpOneHot, In: []int{0}, Shape: []int{2, c}},
			}},
			"cross_entropy": {NumArgs: 2, Nodes: []Node{
				{Op: OpArg, Shape: []int{2, c}}, {Op: OpArg, Arg: 1, Shape: []int{2}},
				{Op: OpCrossEntropy, In: []int{0, 1}, Shape: []int{}},
			}},
		}
		for name, g := range graphs {
			err := g.Validate()
			if c <= MaxClasses && err != nil {
				t.Errorf("%s of %d classes: %v", name, c, err)
			}
			if want := fmt.Sprintf("%d classes", c); c > MaxClasses && (err == nil || !strings.Contains(err.Error(), want)) {
				t.Errorf("%s of %d classes: error %v, want one saying %q", name, c, err, want)
			}
		}
	}
}
