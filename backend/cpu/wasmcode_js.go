//go:build js && wasm

package cpu

// A minimal WebAssembly binary encoder: just what the SIMD GEMM module of
// simdgen_js.go needs (one imported memory, i32/v128 locals, structured
// loops, SIMD128 loads, stores and arithmetic). It exists so that the
// browser build needs nothing but Go: the module is produced at run time.

// Value types.
const (
	wI32  byte = 0x7f
	wV128 byte = 0x7b
)

// Opcodes (core).
const (
	opLoop     byte = 0x03
	opIf       byte = 0x04
	opElse     byte = 0x05
	opEnd      byte = 0x0b
	opBrIf     byte = 0x0d
	opSelect   byte = 0x1b
	opLocalGet byte = 0x20
	opLocalSet byte = 0x21
	opLocalTee byte = 0x22
	opI32Load  byte = 0x28
	opF32Load  byte = 0x2a
	opF32Store byte = 0x38
	opI32Const byte = 0x41
	opI32Eqz   byte = 0x45
	opI32Eq    byte = 0x46
	opI32LtS   byte = 0x48
	opI32GtS   byte = 0x4a
	opI32Add   byte = 0x6a
	opI32Sub   byte = 0x6b
	opI32Mul   byte = 0x6c
	opI32And   byte = 0x71
	opF32Add   byte = 0x92
	blockVoid  byte = 0x40
)

// SIMD opcodes, after the 0xfd prefix (LEB128-encoded).
const (
	simdPrefix      byte   = 0xfd
	simdV128Load    uint32 = 0x00
	simdLoad32Splat uint32 = 0x09
	simdV128Store   uint32 = 0x0b
	simdV128Const   uint32 = 0x0c
	simdF32x4Add    uint32 = 0xe4
	simdF32x4Mul    uint32 = 0xe6
)

// wasmFunc is the body of a function of type () -> () under construction.
type wasmFunc struct {
	locals []byte // type of each local
	code   []byte
}

// local declares a new local of type t and returns its index.
func (f *wasmFunc) local(t byte) uint32 {
	f.locals = append(f.locals, t)
	return uint32(len(f.locals) - 1)
}

func (f *wasmFunc) op(b ...byte)      { f.code = append(f.code, b...) }
func (f *wasmFunc) get(l uint32)      { f.op(opLocalGet); f.code = leb(f.code, l) }
func (f *wasmFunc) set(l uint32)      { f.op(opLocalSet); f.code = leb(f.code, l) }
func (f *wasmFunc) tee(l uint32)      { f.op(opLocalTee); f.code = leb(f.code, l) }
func (f *wasmFunc) i32(v int32)       { f.op(opI32Const); f.code = sleb(f.code, int64(v)) }
func (f *wasmFunc) brIf(depth uint32) { f.op(opBrIf); f.code = leb(f.code, depth) }

// mem emits a load or store with its memarg (alignment log2, offset).
func (f *wasmFunc) mem(op byte, align, offset uint32) {
	f.op(op)
	f.code = leb(leb(f.code, align), offset)
}

// simd emits a SIMD instruction without immediates.
func (f *wasmFunc) simd(op uint32) { f.op(simdPrefix); f.code = leb(f.code, op) }

// simdMem emits a SIMD load or store; alignment hint 4 bytes, as B rows and
// C rows need not be 16-byte aligned (the hint never changes the result).
func (f *wasmFunc) simdMem(op, offset uint32) {
	f.simd(op)
	f.code = leb(leb(f.code, 2), offset)
}

// zero128 emits v128.const 0.
func (f *wasmFunc) zero128() {
	f.simd(simdV128Const)
	f.code = append(f.code, make([]byte, 16)...)
}

// addConst emits l += v.
func (f *wasmFunc) addConst(l uint32, v int32) {
	f.get(l)
	f.i32(v)
	f.op(opI32Add)
	f.set(l)
}

// addLocal emits l += m.
func (f *wasmFunc) addLocal(l, m uint32) {
	f.get(l)
	f.get(m)
	f.op(opI32Add)
	f.set(l)
}

// body encodes the function body: locals (run-length by type) and code.
func (f *wasmFunc) body() []byte {
	var groups []byte
	n := uint32(0)
	for i := 0; i < len(f.locals); {
		j := i
		for j < len(f.locals) && f.locals[j] == f.locals[i] {
			j++
		}
		groups = leb(groups, uint32(j-i))
		groups = append(groups, f.locals[i])
		n++
		i = j
	}
	b := leb(nil, n)
	b = append(b, groups...)
	b = append(b, f.code...)
	b = append(b, opEnd)
	return append(leb(nil, uint32(len(b))), b...)
}

// wasmModule builds a module of functions of type () -> () that import one
// memory as env.mem and are exported by name.
func wasmModule(names []string, funcs []*wasmFunc) []byte {
	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	section := func(id byte, content []byte) {
		m = append(m, id)
		m = leb(m, uint32(len(content)))
		m = append(m, content...)
	}
	section(1, []byte{1, 0x60, 0, 0}) // one type: [] -> []
	imp := leb(nil, 1)
	imp = wasmName(imp, "env")
	imp = wasmName(imp, "mem")
	imp = append(imp, 0x02, 0x00, 0x00) // memory, limits: min 0, no max
	section(2, imp)
	fs := leb(nil, uint32(len(funcs)))
	for range funcs {
		fs = append(fs, 0)
	}
	section(3, fs)
	ex := leb(nil, uint32(len(names)))
	for i, n := range names {
		ex = wasmName(ex, n)
		ex = append(ex, 0x00)
		ex = leb(ex, uint32(i))
	}
	section(7, ex)
	code := leb(nil, uint32(len(funcs)))
	for _, f := range funcs {
		code = append(code, f.body()...)
	}
	section(10, code)
	return m
}

func wasmName(b []byte, s string) []byte { return append(leb(b, uint32(len(s))), s...) }

// leb appends v in unsigned LEB128.
func leb(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// sleb appends v in signed LEB128.
func sleb(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 && c&0x40 == 0 || v == -1 && c&0x40 != 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}
