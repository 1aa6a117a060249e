//go:build js && wasm

package cpu

import (
	"fmt"
	"runtime"
	"syscall/js"
	"unsafe"
)

// Go's wasm compiler emits no SIMD, so under GOOS=js the matmul's inner
// loops run in a second, tiny wasm module generated at start-up
// (simdgen_js.go), which imports this Go instance's memory and reads and
// writes Go's slices in place. It needs WebAssembly SIMD128 (every current
// browser, Node 16.4+); where it cannot be set up the portable Go kernel
// runs instead and simdWhy says why.

// The register tile: 4 rows x 8 columns is 8 f32x4 accumulators, two B
// vectors, one broadcast A value and a product, well within V8's 16 xmm
// registers. In Node 20 on a Zen 5 core (BenchmarkSIMDTiles) it ran 32-41
// GFLOP/s on the browser MLP's products and 512 squares, 5x8 27-33, 4x12
// and 6x8 (register spills) 19-25, the Go kernel 3-4. Unrolling its depth
// loop twice made it slower (30 against 45 at 512).
const simdMR, simdNR = 4, 8

// simdMod is the instantiated module, nil where it is unavailable; simdWhy
// then says why.
var simdMod, simdWhy = loadSIMD(simdMR, simdNR)

// simdKernel is the wasm SIMD kernel as the GEMM sees it.
var simdKernel = simdMod.kernel()

// kernel wraps the module as a micro-kernel. fn and fnRA (one tile per
// call) serve only direct callers such as BenchmarkMicroKernel; the GEMM
// calls block.
func (m *simdModule) kernel() microKernel {
	mr, nr := simdMR, simdNR
	if m != nil {
		mr, nr = m.mr, m.nr
	}
	return microKernel{
		name: fmt.Sprintf("wasm-simd-%dx%d", mr, nr), mr: mr, nr: nr,
		kc: 256, mc: 64, nc: 1024 / nr * nr, // nc: a whole number of panels
		block: m.run,
		fn: func(kc int, a, b []float32, ldb int, c []float32, ldc int, accum bool) {
			m.one = blockCall{kc: kc, a: a, ars: 1, aks: mr, aps: mr * kc, rows: mr,
				b: b, ldb: ldb, bps: nr, cols: nr, c: c, crs: ldc, ccs: 1, accum: accum, tile: m.tile}
			m.run(&m.one)
		},
		fnRA: func(kc int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, accum bool) {
			m.one = blockCall{kc: kc, a: a, ars: lda, aks: 1, aps: mr * lda, rows: mr,
				b: b, ldb: ldb, bps: nr, cols: nr, c: c, crs: ldc, ccs: 1, accum: accum, tile: m.tile}
			m.run(&m.one)
		},
	}
}

// simdModule is an instantiated block-kernel module.
type simdModule struct {
	mr, nr       int
	params       *[nParams]int32 // read by the module at a fixed address
	gemm, gemmRA js.Value        // A packed / A rows in place
	one          blockCall       // fn's and fnRA's call, kept off the stack
	tile         []float32
}

// run makes one call of the module. The slices are Go heap memory (the
// backend's buffers and scratch), which Go's collector never moves, and
// they stay alive across the call; the bounds checks keep a planning bug
// from becoming a write outside them.
func (m *simdModule) run(bc *blockCall) {
	mr, nr := m.mr, m.nr
	if bc.rows <= 0 || bc.cols <= 0 {
		return
	}
	if bc.kc <= 0 { // the module's loops run at least once: C = accum ? C : 0
		for i := 0; i < bc.rows && !bc.accum; i++ {
			for j := range bc.cols {
				bc.c[i*bc.crs+j*bc.ccs] = 0
			}
		}
		return
	}
	packed := bc.ars == 1 && bc.aks == mr
	rowAt := func(i int) int { return i/mr*bc.aps + i%mr*bc.ars }
	var aLast int
	if packed { // every tile reads mr rows (zero-padded)
		aLast = rowAt(roundUp(bc.rows, mr) - 1)
	} else { // rows past the block are not read
		aLast = rowAt(bc.rows - 1)
		if full := bc.rows/mr*mr - 1; full >= 0 {
			aLast = max(aLast, rowAt(full))
		}
	}
	_ = bc.a[aLast+(bc.kc-1)*bc.aks]
	_ = bc.b[(ceilDiv(bc.cols, nr)-1)*bc.bps+(bc.kc-1)*bc.ldb+nr-1]
	_ = bc.c[(bc.rows-1)*bc.crs+(bc.cols-1)*bc.ccs]
	_ = bc.tile[mr*nr-1]
	p := m.params
	p[pKC] = int32(bc.kc)
	p[pA], p[pARS], p[pAKS], p[pAPS] = addr(bc.a), int32(4*bc.ars), int32(4*bc.aks), int32(4*bc.aps)
	p[pRows] = int32(bc.rows)
	p[pB], p[pLDB], p[pBPS], p[pCols] = addr(bc.b), int32(4*bc.ldb), int32(4*bc.bps), int32(bc.cols)
	p[pC], p[pCRS], p[pCCS] = addr(bc.c), int32(4*bc.crs), int32(4*bc.ccs)
	p[pAccum] = 0
	if bc.accum {
		p[pAccum] = 1
	}
	p[pTile] = addr(bc.tile)
	if packed {
		m.gemm.Invoke()
	} else {
		m.gemmRA.Invoke()
	}
	runtime.KeepAlive(bc.a)
	runtime.KeepAlive(bc.b)
	runtime.KeepAlive(bc.c)
	runtime.KeepAlive(bc.tile)
}

// addr is the linear-memory offset of s[0]: under wasm a Go pointer is one.
func addr(s []float32) int32 { return int32(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(s))))) }

// loadSIMD generates the module for mr x nr tiles and instantiates it over
// this instance's memory; on any failure it returns nil and the reason.
func loadSIMD(mr, nr int) (m *simdModule, why string) {
	defer func() {
		if r := recover(); r != nil { // a JavaScript exception (js.Error)
			m, why = nil, fmt.Sprint("wasm SIMD kernel: ", r)
		}
	}()
	wa := js.Global().Get("WebAssembly")
	if wa.Type() != js.TypeObject {
		return nil, "no WebAssembly object"
	}
	mem, why := goMemory()
	if why != "" {
		return nil, why
	}
	m = &simdModule{mr: mr, nr: nr, params: new([nParams]int32), tile: make([]float32, mr*nr)}
	code := simdModuleBytes(mr, nr, uint32(uintptr(unsafe.Pointer(m.params))))
	buf := js.Global().Get("Uint8Array").New(len(code))
	js.CopyBytesToJS(buf, code)
	if !wa.Call("validate", buf).Bool() {
		return nil, "the SIMD module does not validate (no WebAssembly SIMD128 here?)"
	}
	mod := wa.Get("Module").New(buf)
	inst := wa.Get("Instance").New(mod, js.ValueOf(map[string]any{"env": map[string]any{"mem": mem}}))
	m.gemm = inst.Get("exports").Get("gemm")
	m.gemmRA = inst.Get("exports").Get("gemmRA")
	if err := m.selfCheck(); err != "" {
		return nil, err
	}
	return m, ""
}

// selfCheck runs one ragged block through both variants against plain Go,
// so that an engine or encoder fault costs speed, not wrong answers.
func (m *simdModule) selfCheck() string {
	const kc, rows, cols = 5, 6, 17
	lda := kc + 1
	a := make([]float32, rows*lda)
	b := make([]float32, kc*roundUp(cols, m.nr))
	for i := range a {
		a[i] = float32(i%7) - 3
	}
	for i := range b {
		b[i] = float32(i%5) - 2
	}
	ap := make([]float32, roundUp(rows, m.mr)*kc)
	packA(m.mr, ap, a, lda, 1, 0, rows, 0, kc)
	bp := make([]float32, len(b))
	packB(m.nr, bp, b, roundUp(cols, m.nr), 1, 0, kc, 0, cols, 0)
	for _, packed := range []bool{true, false} {
		c := make([]float32, rows*cols)
		bc := blockCall{kc: kc, a: ap, ars: 1, aks: m.mr, aps: m.mr * kc, rows: rows,
			b: bp, ldb: m.nr, bps: kc * m.nr, cols: cols, c: c, crs: cols, ccs: 1, tile: m.tile}
		if !packed {
			bc.a, bc.ars, bc.aks, bc.aps = a, lda, 1, m.mr*lda
		}
		m.run(&bc)
		for i := range rows {
			for j := range cols {
				var want float32
				for p := range kc {
					want += a[i*lda+p] * b[p*roundUp(cols, m.nr)+j]
				}
				if c[i*cols+j] != want { // small integers: exact
					return fmt.Sprintf("the SIMD kernel's self-check failed (packed %v): C(%d, %d) = %v, want %v", packed, i, j, c[i*cols+j], want)
				}
			}
		}
	}
	return ""
}

// jsValue mirrors syscall/js.Value's layout (Go 1.12 on): a ref, NaN-boxed
// with a type flag in the upper bits for objects, and a GC pointer.
type jsValue struct {
	_     [0]func()
	ref   uint64
	gcPtr *uint64
}

// goMemory returns the WebAssembly.Memory of this Go instance. wasm_exec.js
// (Node's go_js_wasm_exec and every page's loader) keeps it on the Go
// object running this program, as _inst.exports.mem; syscall/js knows that
// object as its predefined value 6 but does not export it, so the value is
// built here by hand, after checking on js.Global() (predefined value 5)
// that js.Value is laid out as assumed. The memory found is then proven to
// be this instance's by reading back through it bytes that Go wrote.
func goMemory() (js.Value, string) {
	const objectRef = uint64(0x7ff80000|1) << 32 // NaN head | object type flag
	g := js.Global()
	if unsafe.Sizeof(g) != unsafe.Sizeof(jsValue{}) {
		return js.Value{}, "syscall/js.Value's layout changed: cannot find the Go instance's memory"
	}
	if gl := (*jsValue)(unsafe.Pointer(&g)); gl.ref != objectRef|5 || gl.gcPtr != nil {
		return js.Value{}, "syscall/js.Value's layout changed: cannot find the Go instance's memory"
	}
	goObj := *(*js.Value)(unsafe.Pointer(&jsValue{ref: objectRef | 6}))
	inst := goObj.Get("_inst")
	if inst.Type() != js.TypeObject {
		return js.Value{}, "the Go object has no _inst (not wasm_exec.js's Go class?)"
	}
	mem := inst.Get("exports").Get("mem")
	if !mem.InstanceOf(js.Global().Get("WebAssembly").Get("Memory")) {
		return js.Value{}, "the Go instance exports no memory"
	}
	probe := []byte("ag: which memory is this?")
	view := js.Global().Get("Uint8Array").New(mem.Get("buffer"), uintptr(unsafe.Pointer(&probe[0])), len(probe))
	back := make([]byte, len(probe))
	js.CopyBytesToGo(back, view)
	runtime.KeepAlive(probe)
	if string(back) != string(probe) {
		return js.Value{}, "the memory found is not this Go instance's"
	}
	return mem, ""
}
