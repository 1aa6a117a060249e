package cpu

import (
	"fmt"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/plan"
)

// grain is the number of elements below which an op runs on one goroutine:
// handing work to the pool costs a few microseconds.
const grain = 1 << 15

// Compile plans g (package plan: validation, views, output placement,
// slots by liveness) and builds one closure per computed node.
func (c *CPU) Compile(g *backend.Graph) (backend.Program, error) {
	// A Go allocation that cannot be met kills the process: the plan checks
	// its intermediates against the host's free memory before any is made.
	free, _, err := hostMemory()
	if err != nil {
		free = 0 // unknown: Alloc and the runtime decide
	}
	pl, err := plan.Make(g, plan.Options{SliceViews: true, Limits: plan.Limits{FreeBytes: free}})
	if err != nil {
		return nil, fmt.Errorf("cpu.Compile: %w", err)
	}
	c.mu.Lock() // newGemm sizes the shared scratch
	defer c.mu.Unlock()
	p := &program{
		memBytes: int64(pl.SlotBytes),
		cpu:      c, numArgs: g.NumArgs, nodes: len(g.Nodes),
		argNeed: pl.ArgNeed, bufs: make([]*Buffer, g.NumArgs),
		vals: make([][]float32, len(g.Nodes)), atEnd: pl.AtEnd,
		clock: backend.NewNodeClock(g, backend.EveryRun, nil, nil),
	}
	p.slots = make([][]float32, len(pl.Slots))
	for s, n := range pl.Slots {
		p.slots[s] = make([]float32, n)
	}
	for i, n := range g.Nodes {
		l, size := pl.Loc[i], backend.NumElems(n.Shape)
		switch l.Kind {
		case plan.Slot:
			p.vals[i] = p.slots[l.Idx][l.Off : l.Off+size]
		case plan.Arg:
			p.binds = append(p.binds, bind{node: i, arg: l.Idx, off: l.Off, n: size})
		}
	}
	for i, n := range g.Nodes {
		if !pl.Needed[i] {
			continue
		}
		s := step{node: i, copies: pl.After[i]}
		if !pl.View[i] || n.Op.InPlace() {
			s.fn = p.nodeFunc(g, i)
		}
		if s.fn != nil || len(s.copies) > 0 {
			p.steps = append(p.steps, s)
		}
	}
	return p, nil
}

// rangeFunc returns a closure running body over 0..n, split into parallel
// tasks when n is large. grainN is the smallest worthwhile task, in items.
func (p *program) rangeFunc(n, grainN int, body func(lo, hi int)) func() {
	c := chunks(n, max(grainN, 1))
	if c == 1 {
		return func() { body(0, n) }
	}
	task := func(_, t int) {
		lo, hi := span(n, c, t)
		body(lo, hi)
	}
	par := &p.cpu.par
	return func() { par.do(c, task) }
}

// nodeFunc builds the closure computing node i into p.vals[i].
func (p *program) nodeFunc(g *backend.Graph, i int) func() {
	n := &g.Nodes[i]
	v := p.vals
	size := backend.NumElems(n.Shape)
	in := func(k int) []int { return g.Nodes[n.In[k]].Shape }
	var x0, x1 int
	if len(n.In) > 0 {
		x0 = n.In[0]
	}
	if len(n.In) > 1 {
		x1 = n.In[1]
	}
	switch op := n.Op; {
	case op == backend.OpArg:
		return nil
	case op == backend.OpFill:
		a := n.A
		return p.rangeFunc(size, grain, func(lo, hi int) {
			o := v[i][lo:hi]
			for j := range o {
				o[j] = a
			}
		})
	case op.IsBinary() || op == backend.OpExpand:
		var bs []int
		if op != backend.OpExpand {
			bs = in(1)
		}
		bc := newBcast(n.Shape, in(0), bs)
		sa, sb, inner := bc.sa[3], bc.sb[3], bc.inner
		if bc.rows == 1 {
			return p.rangeFunc(inner, grain, func(lo, hi int) {
				if op == backend.OpExpand {
					copyRow(v[i][lo:hi], v[x0][lo*sa:], sa)
					return
				}
				binRow(op, v[i][lo:hi], v[x0][lo*sa:], v[x1][lo*sb:], sa, sb)
			})
		}
		return p.rangeFunc(bc.rows, grain/inner, func(lo, hi int) {
			o, a := v[i], v[x0]
			for r := lo; r < hi; r++ {
				oa, ob := bc.rowOffsets(r)
				if op == backend.OpExpand {
					copyRow(o[r*inner:(r+1)*inner], a[oa:], sa)
				} else {
					binRow(op, o[r*inner:(r+1)*inner], a[oa:], v[x1][ob:], sa, sb)
				}
			}
		})
	case op.IsUnary():
		A, B := n.A, n.B
		return p.rangeFunc(size, grain, func(lo, hi int) {
			unary(op, A, B, v[i][lo:hi], v[x0][lo:hi])
		})
	case op == backend.OpSum || op == backend.OpMax:
		s := in(0)
		outer, red := backend.NumElems(s[:n.Axis]), s[n.Axis]
		inner := backend.NumElems(s[n.Axis+1:])
		isMax := op == backend.OpMax
		if inner == 1 {
			return p.rangeFunc(outer, grain/red, func(lo, hi int) {
				reduceRows(isMax, v[i], v[x0], red, lo, hi)
			})
		}
		cc := 1 // column chunks per outer block, when outer alone is too few tasks
		if outer < 2*threads() {
			cc = max(1, min(inner/256, 4*threads()))
		}
		unit := red * ceilDiv(inner, cc)
		return p.rangeFunc(outer*cc, grain/unit, func(lo, hi int) {
			for u := lo; u < hi; u++ {
				j0, j1 := span(inner, cc, u%cc)
				reduceCols(isMax, v[i], v[x0], red, inner, u/cc, j0, j1)
			}
		})
	case op == backend.OpSoftmax || op == backend.OpLogSoftmax:
		last := 1 // a scalar is one row of one
		if len(n.Shape) > 0 {
			last = n.Shape[len(n.Shape)-1]
		}
		rows := size / last
		log := op == backend.OpLogSoftmax
		return p.rangeFunc(rows, grain/last, func(lo, hi int) {
			softmaxRows(log, v[i], v[x0], last, lo, hi)
		})
	case op == backend.OpReshape:
		return p.rangeFunc(size, grain, func(lo, hi int) { copy(v[i][lo:hi], v[x0][lo:hi]) })
	case op == backend.OpSliceRows:
		off := n.Start * backend.NumElems(n.Shape[1:])
		return p.rangeFunc(size, grain, func(lo, hi int) { copy(v[i][lo:hi], v[x0][off+lo:off+hi]) })
	case op == backend.OpPermute:
		pp := newPermute(in(0), n.Perm)
		rows := pp.shape[0] * pp.shape[1] * pp.shape[2]
		return p.rangeFunc(rows, grain/pp.shape[3], func(lo, hi int) { pp.run(v[i], v[x0], lo, hi) })
	case op == backend.OpConcatRows:
		na := backend.NumElems(in(0))
		return func() {
			copy(v[i][:na], v[x0])
			copy(v[i][na:], v[x1])
		}
	case op == backend.OpGetRows:
		t := in(0)
		width, rows := backend.NumElems(t[1:]), t[0]
		return p.rangeFunc(n.Shape[0], grain/width, func(lo, hi int) {
			getRows(v[i][lo*width:hi*width], v[x0], v[x1][lo:hi], width, rows)
		})
	case op == backend.OpScatterAddRows:
		width, rows := backend.NumElems(n.Shape[1:]), n.Shape[0]
		return func() { scatterAddRows(v[i], v[x0], v[x1], width, rows) }
	case op == backend.OpOneHot:
		classes := n.Shape[1]
		return func() { oneHot(v[i], v[x0], classes) }
	case op == backend.OpMatMul:
		r := len(n.Shape)
		batch := backend.NumElems(n.Shape[:r-2])
		a := in(0)
		k := a[r-1]
		if n.TransA {
			k = a[r-2]
		}
		gm := newGemm(p.cpu, kern, batch, n.Shape[r-2], n.Shape[r-1], k, n.TransA, n.TransB)
		return func() { gm.run(v[x0], v[x1], v[i]) }
	case op == backend.OpAttention:
		at := newAttention(n, in(0), in(1), in(2), in(3))
		x2, x3 := n.In[2], n.In[3]
		rows := backend.NumElems(in(0)) / at.d
		return p.rangeFunc(rows, grain/(at.tk*(at.d+at.dv)), func(lo, hi int) {
			at.run(v[i], v[x0], v[x1], v[x2], v[x3], lo, hi)
		})
	case op == backend.OpAdamW:
		w, gr, m, vv, hp := n.In[0], n.In[1], n.In[2], n.In[3], n.In[4]
		return p.rangeFunc(size, grain/4, func(lo, hi int) { adamW(v[w], v[gr], v[m], v[vv], v[hp], lo, hi) })
	case op == backend.OpSGD:
		w, gr, vel, hp := n.In[0], n.In[1], n.In[2], n.In[3]
		return p.rangeFunc(size, grain/2, func(lo, hi int) { sgd(v[w], v[gr], v[vel], v[hp], lo, hi) })
	case op == backend.OpPackF16 || op == backend.OpPackBF16:
		bf, ne := op == backend.OpPackBF16, backend.NumElems(in(0))
		return p.rangeFunc(size, grain/2, func(lo, hi int) {
			backend.PackHalves(v[i][lo:hi], v[x0][2*lo:min(2*hi, ne)], bf)
		})
	case op == backend.OpUnpackF16 || op == backend.OpUnpackBF16:
		bf := op == backend.OpUnpackBF16
		if ws := in(0); len(ws) == 2 {
			// rows form: each row of w values from its own W words (an odd
			// w leaves the last word's high half unread)
			w, W := n.Shape[1], ws[1]
			return p.rangeFunc(ws[0], grain/w, func(lo, hi int) {
				for r := lo; r < hi; r++ {
					backend.UnpackHalves(v[i][r*w:(r+1)*w], v[x0][r*W:(r+1)*W], bf)
				}
			})
		}
		return p.rangeFunc(backend.PackedLen(size), grain/2, func(lo, hi int) { // whole words a task
			backend.UnpackHalves(v[i][2*lo:min(2*hi, size)], v[x0][lo:hi], bf)
		})
	case op == backend.OpRandUniform:
		start := n.Start
		// The state is read at run time (a compiled program draws new
		// numbers when it changes); tasks split at whole blocks of 4.
		return func() {
			key, ctr := backend.ParseRandState(v[x0])
			p.rangeFunc((size+3)/4, grain/16, func(lo, hi int) {
				e0, e1 := 4*lo, min(4*hi, size)
				backend.RandUniformFill(v[i][e0:e1], key, ctr, start, e0)
			})()
		}
	}
	backend.Unknown("cpu.nodeFunc", n.Op)
	return nil
}
