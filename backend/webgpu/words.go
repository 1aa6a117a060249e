package webgpu

import "fmt"

// Tables of packed 16-bit values (core.HalfTable): a get_rows of their
// words (backend.Graph.WordGathers) copies u32 words, never f32 values, so
// that no word is touched as a float (an f32 subnormal or signaling NaN
// word may be flushed or quieted by a float copy); the fusion planner
// never inlines into it, and only unpackRows reads its result.

// unpackRows adds the dispatches of an unpack's rows form: rows records
// of w values from W words each (an odd w's last high half is padding).
// One invocation per word; a table larger than one binding runs as ranges
// of whole records whose words and values both start at aligned offsets.
func (p *program) unpackRows(node int, bf bool, words, vals bref, rows, w, W int) error {
	rc := rows
	if !p.lim.Fits(rows * max(w, W)) {
		if rc = p.lim.RangeRecords(W, w); rc == 0 {
			return fmt.Errorf("a record of %d values exceeds the binding limit of %d bytes", w, p.b.bindLimit)
		}
	}
	k := unpackRowsKernel(bf)
	for r0 := 0; r0 < rows; r0 += rc {
		l := min(rc, rows-r0)
		wr := bref{kind: words.kind, idx: words.idx, off: uint64(r0*W) * 4, size: uint64(l*W) * 4}
		vr := bref{kind: vals.kind, idx: vals.idx, off: uint64(r0*w) * 4, size: uint64(l*w) * 4}
		x, y := p.grid(l*W, wg)
		p.add(node, k, []bref{wr, vr}, []uint32{uint32(l * W), uint32(w), uint32(W)}, x, y, 1)
	}
	return nil
}

// unpackRowsKernel is the rows form of unpack_f16 (bf false) or
// unpack_bf16: invocation i decodes word i, the (i % W)-th of record
// i / W, into its record's values 2(i % W) and, but for an odd record's
// padding, 2(i % W) + 1. Params [words, w, W].
func unpackRowsKernel(bf bool) *kernel {
	dec, name := "f16val", "unpack_f16_rows"
	if bf {
		dec, name = "bf16val", "unpack_bf16_rows"
	}
	return newKernel(name, []bindDecl{{name: "X", u32: true}, {name: "Y", rw: true}}, halfBits+linearHead+`
	if (i >= P[0]) { return; }
	let w = P[1];
	let W = P[2];
	let c = 2u * (i % W);
	let o = (i / W) * w + c;
	let x = X[i];
	Y[o] = `+dec+`(x & 0xffffu);
	if (c + 1u < w) { Y[o + 1u] = `+dec+`(x >> 16u); }
}
`)
}
