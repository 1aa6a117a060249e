package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
)

// file builds a safetensors file from a header string and data bytes, as
// a hand-made (or hostile) writer would.
func file(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func f32bytes(v ...float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// TestReadHandMade reads a file written byte by byte as the format's
// description says, with tensors stored out of name order, a padded header
// and every supported dtype.
func TestReadHandMade(t *testing.T) {
	data := f32bytes(1, -2.5)
	data = binary.LittleEndian.AppendUint16(data, 0x3c00)                // f16 1
	data = binary.LittleEndian.AppendUint16(data, 0xc000)                // f16 -2
	data = binary.LittleEndian.AppendUint16(data, 0x3fc0)                // bf16 1.5
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(0.1)) // f64
	data = binary.LittleEndian.AppendUint64(data, uint64(7))             // i64
	data = binary.LittleEndian.AppendUint32(data, uint32(0xffffffff))    // i32 -1
	h := `{"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},` +
		`"a":{"dtype":"F16","shape":[1,2],"data_offsets":[8,12]},` +
		`"__metadata__":{"format":"pt"},` +
		`"c":{"dtype":"BF16","shape":[],"data_offsets":[12,14]},` +
		`"d":{"dtype":"F64","shape":[1],"data_offsets":[14,22]},` +
		`"e":{"dtype":"I64","shape":[1],"data_offsets":[22,30]},` +
		`"f":{"dtype":"I32","shape":[1],"data_offsets":[30,34]},` +
		`"z":{"dtype":"F32","shape":[0,3],"data_offsets":[34,34]}}   `
	f, err := Read(bytes.NewReader(file(h, data)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Tensor{
		{"b", F32, []int{2}, []float32{1, -2.5}},
		{"a", F16, []int{1, 2}, []float32{1, -2}},
		{"c", BF16, []int{}, []float32{1.5}},
		{"d", F64, []int{1}, []float32{float32(0.1)}},
		{"e", I64, []int{1}, []float32{7}},
		{"f", I32, []int{1}, []float32{-1}},
		{"z", F32, []int{0, 3}, []float32{}},
	}
	if len(f.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for i, w := range want {
		g := f.Tensors[i]
		if g.Name != w.Name || g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || !slices.Equal(g.Data, w.Data) {
			t.Errorf("tensor %d: %+v, want %+v", i, g, w)
		}
	}
	if f.Metadata["format"] != "pt" || len(f.Metadata) != 1 {
		t.Errorf("metadata %v", f.Metadata)
	}
	if _, ok := f.Tensor("a"); !ok {
		t.Error(`Tensor("a") not found`)
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := make([]float32, 257)
	for i := range vals {
		vals[i] = float32(r.NormFloat64() * math.Pow(10, float64(r.IntN(12)-6)))
	}
	vals = append(vals, 0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
		65504, 65519.99, 65520, 1e-8, -3e-5, 5.9604645e-08, 2.9802322e-08, 2.9802326e-08)
	for _, dt := range []DType{F32, F16, BF16, ""} {
		in := &File{Metadata: map[string]string{"k": "v", "<&>": "é"}, Tensors: []Tensor{
			{Name: "w.x", DType: dt, Shape: []int{len(vals)}, Data: vals},
			{Name: "empty", DType: dt, Shape: []int{2, 0}, Data: nil},
			{Name: "scalar", DType: dt, Shape: nil, Data: []float32{3}},
		}}
		var buf bytes.Buffer
		if err := Write(&buf, in); err != nil {
			t.Fatal(err)
		}
		hlen := binary.LittleEndian.Uint64(buf.Bytes())
		if (8+hlen)%8 != 0 {
			t.Errorf("%s: header of %d bytes: the data is not 8-byte aligned", dt, hlen)
		}
		out, err := Read(&buf)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		round := func(x float32) float32 { return x }
		switch dt {
		case F16:
			round = backend.RoundF16
		case BF16:
			round = backend.RoundBF16
		}
		got := out.Tensors[0]
		wantDT := dt
		if dt == "" {
			wantDT = F32
		}
		if got.DType != wantDT || !slices.Equal(got.Shape, []int{len(vals)}) {
			t.Fatalf("%s: read %s %v", dt, got.DType, got.Shape)
		}
		for i, x := range vals {
			if w := round(x); math.Float32bits(got.Data[i]) != math.Float32bits(w) {
				t.Errorf("%s: value %d: %g read back as %g, want %g", dt, i, x, got.Data[i], w)
			}
		}
		if e := out.Tensors[1]; e.Name != "empty" || len(e.Data) != 0 || !slices.Equal(e.Shape, []int{2, 0}) {
			t.Errorf("%s: empty tensor read as %+v", dt, e)
		}
		if s := out.Tensors[2]; len(s.Shape) != 0 || !slices.Equal(s.Data, []float32{3}) {
			t.Errorf("%s: scalar read as %+v", dt, s)
		}
		if out.Metadata["<&>"] != "é" || out.Metadata["k"] != "v" {
			t.Errorf("%s: metadata %v", dt, out.Metadata)
		}
	}
}

// TestHalfBits checks the bit conversions on every f16 and bf16 pattern
// and on random floats against backend's rounding.
func TestHalfBits(t *testing.T) {
	for h := range 1 << 16 {
		x := F16ToF32(uint16(h))
		isNaN := x != x
		if (h&0x7c00 == 0x7c00 && h&0x3ff != 0) != isNaN {
			t.Fatalf("f16 %#04x: %g", h, x)
		}
		if back := F32ToF16(x); isNaN && back&0x7fff != 0x7e00 || !isNaN && back != uint16(h) {
			t.Fatalf("f16 %#04x -> %g -> %#04x", h, x, back)
		}
		b := math.Float32frombits(uint32(h) << 16)
		if back := F32ToBF16(b); b == b && back != uint16(h) || b != b && back&0x7fff != 0x7fc0 {
			t.Fatalf("bf16 %#04x -> %g -> %#04x", h, b, back)
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 200000 {
		x := math.Float32frombits(r.Uint32())
		if x != x {
			continue
		}
		if got, want := F16ToF32(F32ToF16(x)), backend.RoundF16(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("f16 of %g (%#08x): %g, want %g", x, math.Float32bits(x), got, want)
		}
		if got, want := math.Float32frombits(uint32(F32ToBF16(x))<<16), backend.RoundBF16(x); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("bf16 of %g: %g, want %g", x, got, want)
		}
	}
	nan := math.Float32frombits(0xff800001) // a NaN whose payload is only in the bits bf16 drops
	if b := F32ToBF16(nan); b != 0xffc0 {
		t.Errorf("bf16 of NaN %#08x: %#04x, want 0xffc0", math.Float32bits(nan), b)
	}
	if h := F32ToF16(nan); h != 0xfe00 {
		t.Errorf("f16 of NaN: %#04x, want 0xfe00", h)
	}
}

func TestReadRejects(t *testing.T) {
	ok := `{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`
	d8 := make([]byte, 8)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "file ends in the header length"},
		{"short length", []byte{1, 2, 3}, "header length (3 of 8"},
		{"huge header", binary.LittleEndian.AppendUint64(nil, 1<<40), "header length 1099511627776 outside"},
		{"header cut", file(ok, nil)[:20], "file ends in the header"},
		{"not an object", file(`[1,2]`, nil), "starts with '['"},
		{"bad json", file(`{"a":}`, nil), "header"},
		{"not utf8", file("{\"\xff\":1}", nil), "not valid UTF-8"},
		{"after json", file(`{} {}`, nil), "more after its JSON"},
		{"duplicate", file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}`, nil), `name "a" appears twice`},
		{"unknown dtype", file(`{"a":{"dtype":"F8","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), `dtype "F8" is not supported`},
		{"unknown field", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}}`, d8), "unknown field"},
		{"missing field", file(`{"a":{"dtype":"F32","shape":[2]}}`, d8), "want dtype, shape and data_offsets"},
		{"negative dim", file(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, d8), `tensor "a"`},
		{"fraction dim", file(`{"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,8]}}`, d8), `tensor "a"`},
		{"three offsets", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,9]}}`, d8), "want [begin, end]"},
		{"reversed", file(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, d8), "end before they begin"},
		{"size mismatch", file(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, d8), "its shape [3] of F32 needs 12"},
		{"overflow shape", file(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, d8), "over 2^52"},
		{"overlap", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, d8), "overlap"},
		{"gap", file(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, d8), "leave bytes [0 4] unused"},
		{"data cut", file(ok, d8[:5]), "file ends in the data (5 of 8"},
		{"huge data", file(`{"a":{"dtype":"F64","shape":[4503599627370496],"data_offsets":[0,36028797018963968]}}`, d8), "file ends in the data (8 of"},
		{"trailing", file(ok, append(d8, 0)), "bytes after the data"},
		{"metadata not strings", file(`{"__metadata__":{"a":1}}`, nil), "want an object of strings"},
		// encoding/json keeps the last of repeated keys and reads null as "":
		// these read as the F16 tensor and an empty string.
		{"repeated field", file(`{"a":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,2]}}`, d8[:2]), `tensor "a": field "dtype" appears twice`},
		{"repeated metadata", file(`{"__metadata__":{"k":"1","k":"2"}}`, nil), `key "k" appears twice`},
		{"metadata null", file(`{"__metadata__":{"k":null}}`, nil), `"k" is null`},
		{"i64 inexact", file(`{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}`, binary.LittleEndian.AppendUint64(nil, 1<<24+1)), "16777217"},
		{"i32 inexact", file(`{"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}`, binary.LittleEndian.AppendUint32(nil, 1<<31-1)), "2147483647"},
	}
	for _, c := range cases {
		_, err := Read(bytes.NewReader(c.b))
		if err == nil {
			t.Errorf("%s: read without error", c.name)
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "safetensors.Read: ") {
			t.Errorf("%s: error %q, want one wrapping ErrInvalid containing %q", c.name, err, c.want)
		}
	}
}

func TestWriteRejects(t *testing.T) {
	cases := []struct {
		name string
		f    File
		want string
	}{
		{"dtype", File{Tensors: []Tensor{{Name: "a", DType: F64, Shape: []int{1}, Data: []float32{1}}}}, `dtype "F64"`},
		{"duplicate", File{Tensors: []Tensor{{Name: "a", Shape: []int{1}, Data: []float32{1}}, {Name: "a", Shape: []int{1}, Data: []float32{1}}}}, "taken"},
		{"reserved", File{Tensors: []Tensor{{Name: MetadataKey, Shape: []int{1}, Data: []float32{1}}}}, "reserved"},
		{"count", File{Tensors: []Tensor{{Name: "a", Shape: []int{2, 2}, Data: []float32{1}}}}, "holds 4 values, Data has 1"},
		{"negative", File{Tensors: []Tensor{{Name: "a", Shape: []int{-1}}}}, "shape [-1]"},
		// The products wrap to 0 = len(Data): the file written was one Read refuses.
		{"overflow", File{Tensors: []Tensor{{Name: "a", Shape: []int{1 << 32, 1 << 32}}}}, "shape [4294967296 4294967296] has over 2^52 elements"},
		{"overflow past 0", File{Tensors: []Tensor{{Name: "a", Shape: []int{1 << 62, 4, 0}}}}, "over 2^52 elements"},
		{"metadata utf8", File{Metadata: map[string]string{"a": "\xff"}}, "not UTF-8"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		err := Write(&buf, &c.f)
		if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrInvalid with %q", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: wrote %d bytes before refusing", c.name, buf.Len())
		}
	}
}

// FuzzRead checks that Read never panics and that what it accepts writes
// back (as F32) to a file it reads to the same values.
func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	Write(&buf, &File{Metadata: map[string]string{"m": "1"}, Tensors: []Tensor{
		{Name: "a", DType: F16, Shape: []int{2}, Data: []float32{1, 2}},
		{Name: "b", Shape: []int{1, 1}, Data: []float32{3}},
	}})
	f.Add(buf.Bytes())
	f.Add(file(`{"a":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}`, []byte{1, 2}))
	f.Add(file(`{"x":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},"__metadata__":null}`, make([]byte, 8)))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Read(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not wrapping ErrInvalid: %v", err)
			}
			return
		}
		for i := range got.Tensors {
			got.Tensors[i].DType = F32
		}
		var out bytes.Buffer
		if err := Write(&out, got); err != nil {
			t.Fatalf("writing back what Read accepted: %v", err)
		}
		again, err := Read(&out)
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if len(again.Tensors) != len(got.Tensors) {
			t.Fatalf("%d tensors, then %d", len(got.Tensors), len(again.Tensors))
		}
		for i, a := range again.Tensors {
			g := got.Tensors[i]
			if a.Name != g.Name || !slices.Equal(a.Shape, g.Shape) || len(a.Data) != len(g.Data) {
				t.Fatalf("tensor %d: %q %v, then %q %v", i, g.Name, g.Shape, a.Name, a.Shape)
			}
			for j := range a.Data {
				if math.Float32bits(a.Data[j]) != math.Float32bits(g.Data[j]) {
					t.Fatalf("tensor %q value %d: %g, then %g", g.Name, j, g.Data[j], a.Data[j])
				}
			}
		}
	})
}
