//go:build ggml

package native

/*
#include "ag_ggml.h"
*/
import "C"

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// hostStats counts the host time of the package's calls into ggml, so a
// benchmark can tell the device's share of a training step from the rest
// (recording, lowering, transfers). Always on: a few atomic adds per call.
type hostStats struct {
	runs, bindNs, computeNs atomic.Int64
	writes, writeNs         atomic.Int64
	reads, readNs           atomic.Int64
	allocs, allocNs         atomic.Int64
	compiles, compileNs     atomic.Int64
}

var stats hostStats

func since(c *atomic.Int64, t time.Time) { c.Add(int64(time.Since(t))) }

// snapshot returns the counters as a map (for tests and diagnostics).
func (s *hostStats) snapshot() map[string]int64 {
	return map[string]int64{
		"runs": s.runs.Load(), "bindNs": s.bindNs.Load(), "computeNs": s.computeNs.Load(),
		"writes": s.writes.Load(), "writeNs": s.writeNs.Load(),
		"reads": s.reads.Load(), "readNs": s.readNs.Load(),
		"allocs": s.allocs.Load(), "allocNs": s.allocNs.Load(),
		"compiles": s.compiles.Load(), "compileNs": s.compileNs.Load(),
	}
}

// dumpEnv, when set to 1, makes Compile print each program's ggml op counts
// to stderr (which ops a graph lowered to, and how many).
const dumpEnv = "AG_GGML_DUMP"

// opCounts summarizes the ggml graph: node count per op (views and other
// no-op nodes included, marked by ggml's own op names; a product with its
// sizes and operand type, a flash attention with k and v's type).
func (l *lowering) opCounts() string {
	counts := map[string]int{}
	nn := int(C.ggml_graph_n_nodes(l.gf))
	for k := 0; k < nn; k++ {
		t := C.ggml_graph_node(l.gf, C.int(k))
		name := C.GoString(C.ggml_op_desc(t))
		if t.op == C.GGML_OP_MUL_MAT {
			name = fmt.Sprintf("%s[%dx%dx%d b%d %s]", name, t.ne[1]*t.ne[2], t.ne[0], t.src[0].ne[0], t.ne[2], C.GoString(C.ggml_type_name(t.src[0]._type)))
		}
		if t.op == C.GGML_OP_FLASH_ATTN_EXT {
			name = fmt.Sprintf("%s[%s]", name, C.GoString(C.ggml_type_name(t.src[1]._type))) // k and v's type
		}
		if t.op == C.GGML_OP_CUSTOM {
			name += "(" + C.GoString(C.ag_custom_name(t)) + ")"
		}
		counts[name]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%d IR nodes -> %d ggml nodes:", len(l.g.Nodes), nn)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, counts[k])
	}
	return b.String()
}

// opSequence is the graph's compute nodes' ops in execution order, space
// separated (views, reshapes and other no-op nodes left out): the order
// ggml-vulkan puts its barriers and fusions by.
func (l *lowering) opSequence() string {
	var ops []string
	nn := int(C.ggml_graph_n_nodes(l.gf))
	for k := 0; k < nn; k++ {
		t := C.ggml_graph_node(l.gf, C.int(k))
		switch t.op {
		case C.GGML_OP_NONE, C.GGML_OP_VIEW, C.GGML_OP_RESHAPE, C.GGML_OP_PERMUTE, C.GGML_OP_TRANSPOSE:
			continue
		}
		ops = append(ops, C.GoString(C.ggml_op_desc(t)))
	}
	return strings.Join(ops, " ")
}

func dumpGraph(name string, l *lowering) {
	switch os.Getenv(dumpEnv) {
	case "1":
		fmt.Fprintf(os.Stderr, "native: %s Compile: %s\n", name, l.opCounts())
	case "2":
		fmt.Fprintf(os.Stderr, "native: %s Compile: %s\n", name, l.opCounts())
		// Sources are named by their node number (#k), else as leaves:
		// "arg" for a bound buffer, "leaf" for a constant.
		nn := int(C.ggml_graph_n_nodes(l.gf))
		index := make(map[tensor]int, nn)
		isArg := map[tensor]bool{}
		for _, a := range l.args {
			isArg[a.t] = true
		}
		ir := 0 // the IR node a ggml node was made for (nodeEnd)
		for k := 0; k < nn; k++ {
			t := C.ggml_graph_node(l.gf, C.int(k))
			index[t] = k
			for ir < len(l.nodeEnd) && k >= l.nodeEnd[ir] {
				ir++
			}
			of := "out" // the copies into the outputs' args
			if ir < len(l.g.Nodes) {
				of = fmt.Sprintf("%d %s", ir, l.g.Nodes[ir].Op)
			}
			fmt.Fprintf(os.Stderr, "  %3d %-14s %s[%d %d %d %d] (IR %s)", k, C.GoString(C.ggml_op_desc(t)), C.GoString(C.ggml_type_name(t._type)), t.ne[0], t.ne[1], t.ne[2], t.ne[3], of)
			for j := 0; j < 3 && t.src[j] != nil; j++ {
				s := t.src[j]
				name := "leaf"
				if i, ok := index[s]; ok {
					name = fmt.Sprintf("#%d", i)
				} else if isArg[s] {
					name = "arg"
				}
				fmt.Fprintf(os.Stderr, " src%d=%s%s[%d %d]", j, name, C.GoString(C.ggml_type_name(s._type)), s.ne[0], s.ne[1])
			}
			fmt.Fprintln(os.Stderr)
		}
	}
}
