// Package safetensors reads and writes the safetensors format
// (github.com/huggingface/safetensors): named tensors with shapes and
// dtypes, as PyTorch, JAX and the Hugging Face libraries exchange weights.
// A file is
//
//	N       8 bytes, little-endian uint64: the length of the header
//	header  N bytes of JSON: {"__metadata__": {"key": "value", ...},
//	        "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...}
//	data    the tensors' bytes, little-endian, row-major; data_offsets are
//	        [begin, end) relative to the start of the data
//
// Values are float32 in Go (ag's dtype). Read converts F32, F16, BF16 and
// F64 exactly or by rounding to nearest (F64), and I64, I32 when every value
// is a whole number float32 holds exactly (so a PyTorch BatchNorm's
// num_batches_tracked reads). Write writes F32, F16 or BF16, rounding to the
// nearest half value, ties to even (backend.RoundF16, backend.RoundBF16:
// the rounding of ag's f16/bf16 ops); a value past the largest f16 (65504
// plus half a step) becomes Inf, and NaN stays NaN (as the canonical quiet
// NaN of its sign; the payload is not kept).
//
// Read checks the whole file before returning anything: the header's length
// (at most 100 MB, as the reference implementation), its JSON (valid UTF-8,
// an object, no duplicate names or keys, no unknown fields, exactly the
// three fields per tensor, metadata of strings), every dtype, every shape
// against its byte range, the ranges covering the data exactly (no overlap,
// no gap, none outside) and no byte after the data. Every such refusal
// wraps ErrInvalid.
package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/ag-go/ag/backend"
)

// DType is a tensor's element type in a file, spelt as the format spells it.
type DType string

// The dtypes Read converts to float32; Write writes F32, F16 and BF16.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	F64  DType = "F64"
	I64  DType = "I64"
	I32  DType = "I32"
)

// Size is the bytes of one element of d, 0 for a dtype this package does
// not know.
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case F16, BF16:
		return 2
	case F64, I64:
		return 8
	}
	return 0
}

// MetadataKey is the header's reserved name for the string-to-string
// metadata; no tensor may have it.
const MetadataKey = "__metadata__"

// MaxHeader is the largest header Read accepts, as the reference
// implementation (100 MB).
const MaxHeader = 100 << 20

// ErrInvalid is wrapped by every error of Read for a file that is not a
// well-formed safetensors file of supported dtypes, and of Write for
// tensors it cannot write.
var ErrInvalid = errors.New("safetensors: invalid")

// Tensor is one named tensor. In a file Read returns, DType is the dtype the
// file stored it in and Data its values converted to float32; for Write,
// DType is the dtype to write ("" is F32).
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []float32 // row-major, len = the product of Shape (1 for [])
}

// File is a file's tensors, in the order of their data, and its metadata
// (nil when it has none).
type File struct {
	Tensors  []Tensor
	Metadata map[string]string
}

// Tensor returns the tensor named name and whether the file has it.
func (f *File) Tensor(name string) (Tensor, bool) {
	for _, t := range f.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return Tensor{}, false
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("safetensors.Read: "+format+": %w", append(args, ErrInvalid)...)
}

// entry is a tensor's header entry; the pointers tell a missing field from
// a zero one.
type entry struct {
	DType       *string   `json:"dtype"`
	Shape       *[]uint64 `json:"shape"`
	DataOffsets *[]uint64 `json:"data_offsets"`
}

// span is one tensor's place in the data, as checked.
type span struct {
	name       string
	dtype      DType
	shape      []int
	begin, end uint64
}

// maxElems bounds a tensor's element count so that counts and byte sizes
// never overflow an int, even on 32-bit platforms' int64 arithmetic here.
const maxElems = 1 << 52

// Read reads a whole safetensors file from r (to its end) and returns its
// tensors as float32, in the order of their data. See the package comment
// for what it checks; a refused file is an error wrapping ErrInvalid that
// names the tensor and the values, and an error of r is returned wrapped.
// Its memory is bounded by the bytes r actually holds, never by sizes a
// header claims.
func Read(r io.Reader) (*File, error) {
	br := bufio.NewReader(r)
	var nb [8]byte
	if n, err := io.ReadFull(br, nb[:]); err != nil {
		return nil, readErr(err, fmt.Sprintf("the header length (%d of 8 bytes)", n))
	}
	n := binary.LittleEndian.Uint64(nb[:])
	if n < 2 || n > MaxHeader {
		return nil, invalid("header length %d outside [2, %d]", n, MaxHeader)
	}
	var hb bytes.Buffer
	if k, err := io.CopyN(&hb, br, int64(n)); err != nil {
		return nil, readErr(err, fmt.Sprintf("the header (%d of %d bytes)", k, n))
	}
	spans, meta, err := parseHeader(hb.Bytes())
	if err != nil {
		return nil, err
	}
	var size uint64
	if len(spans) > 0 {
		size = spans[len(spans)-1].end
	}
	if size > 1<<62 {
		return nil, invalid("data of %d bytes", size)
	}
	var data bytes.Buffer // grows with what arrives, not with what the header claims
	if k, err := io.CopyN(&data, br, int64(size)); err != nil {
		return nil, readErr(err, fmt.Sprintf("the data (%d of %d bytes)", k, size))
	}
	switch k, err := br.Discard(1); {
	case k == 1:
		return nil, invalid("bytes after the data's %d", size)
	case err != io.EOF:
		return nil, fmt.Errorf("safetensors.Read: reading past the data: %w", err)
	}
	f := &File{Metadata: meta, Tensors: make([]Tensor, len(spans))}
	raw := data.Bytes()
	for i, s := range spans {
		v, err := decode(s.dtype, raw[s.begin:s.end])
		if err != nil {
			return nil, invalid("tensor %q: %v", s.name, err)
		}
		f.Tensors[i] = Tensor{Name: s.name, DType: s.dtype, Shape: s.shape, Data: v}
	}
	return f, nil
}

// readErr turns a short read into ErrInvalid and passes others on.
func readErr(err error, what string) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return invalid("file ends in %s", what)
	}
	return fmt.Errorf("safetensors.Read: reading %s: %w", what, err)
}

// parseHeader checks the header and returns the tensors' spans sorted by
// offset, and the metadata.
func parseHeader(h []byte) ([]span, map[string]string, error) {
	if !utf8.Valid(h) {
		return nil, nil, invalid("header is not valid UTF-8")
	}
	if h[0] != '{' {
		return nil, nil, invalid("header starts with %q, want '{'", h[0])
	}
	dec := json.NewDecoder(bytes.NewReader(h))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil {
		return nil, nil, invalid("header: %v", err)
	}
	var spans []span
	var meta map[string]string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, invalid("header: %v", err)
		}
		name := tok.(string) // an object's keys are strings
		if seen[name] {
			return nil, nil, invalid("header: name %q appears twice", name)
		}
		seen[name] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, invalid("header: value of %q: %v", name, err)
		}
		if name == MetadataKey {
			if meta, err = parseMetadata(raw); err != nil {
				return nil, nil, err
			}
			continue
		}
		s, err := parseEntry(name, raw)
		if err != nil {
			return nil, nil, err
		}
		spans = append(spans, s)
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, nil, invalid("header: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, invalid("header: more after its JSON object (at byte %d of %d)", dec.InputOffset(), len(h))
	}
	// The data is the tensors' ranges end to end, in some order: sorted by
	// begin, each must start where the one before ended.
	slices.SortStableFunc(spans, func(a, b span) int {
		if a.begin != b.begin {
			return cmpU(a.begin, b.begin)
		}
		return cmpU(a.end, b.end)
	})
	var at uint64
	for i, s := range spans {
		if s.begin != at {
			if s.begin < at {
				return nil, nil, invalid("tensor %q: data_offsets [%d %d] overlap %q's [%d %d]", s.name, s.begin, s.end, spans[i-1].name, spans[i-1].begin, spans[i-1].end)
			}
			return nil, nil, invalid("tensor %q: data_offsets [%d %d] leave bytes [%d %d] unused", s.name, s.begin, s.end, at, s.begin)
		}
		at = s.end
	}
	return spans, meta, nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseMetadata checks the metadata: an object of strings (or null), each
// key once. A null value is refused, not read as "".
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	if k, ok := repeatedKey(raw); ok {
		return nil, invalid("header: %s: key %q appears twice", MetadataKey, k)
	}
	var m map[string]*string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, invalid("header: %s: want an object of strings: %v", MetadataKey, err)
	}
	if m == nil {
		return nil, nil
	}
	meta := make(map[string]string, len(m))
	for k, v := range m {
		if v == nil {
			return nil, invalid("header: %s: %q is null, want an object of strings", MetadataKey, k)
		}
		meta[k] = *v
	}
	return meta, nil
}

// repeatedKey returns a key that raw, a JSON object, holds more than once.
// encoding/json keeps the last of them silently, where the reference
// implementation refuses the header: two readers would read two files.
func repeatedKey(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false // not an object: decoding it says so
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		k, _ := tok.(string)
		if seen[k] {
			return k, true
		}
		seen[k] = true
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return "", false
		}
	}
	return "", false
}

// parseEntry checks one tensor's entry.
func parseEntry(name string, raw json.RawMessage) (span, error) {
	if k, ok := repeatedKey(raw); ok {
		return span{}, invalid("tensor %q: field %q appears twice", name, k)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var e entry
	if err := dec.Decode(&e); err != nil {
		return span{}, invalid("tensor %q: %v", name, err)
	}
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return span{}, invalid("tensor %q: want dtype, shape and data_offsets, got %s", name, raw)
	}
	dt := DType(*e.DType)
	if dt.Size() == 0 {
		return span{}, invalid("tensor %q: dtype %q is not supported (F32, F16, BF16, F64, I64, I32)", name, *e.DType)
	}
	elems := uint64(1)
	shape := make([]int, len(*e.Shape))
	for i, d := range *e.Shape {
		if d > maxElems || d > 0 && elems > maxElems/d {
			return span{}, invalid("tensor %q: shape %v has over 2^52 elements", name, *e.Shape)
		}
		elems *= d
		shape[i] = int(d)
	}
	off := *e.DataOffsets
	if len(off) != 2 {
		return span{}, invalid("tensor %q: data_offsets %v, want [begin, end]", name, off)
	}
	if off[0] > off[1] {
		return span{}, invalid("tensor %q: data_offsets [%d %d] end before they begin", name, off[0], off[1])
	}
	if need := elems * uint64(dt.Size()); off[1]-off[0] != need {
		return span{}, invalid("tensor %q: data_offsets [%d %d] hold %d bytes, its shape %v of %s needs %d", name, off[0], off[1], off[1]-off[0], shape, dt, need)
	}
	return span{name: name, dtype: dt, shape: shape, begin: off[0], end: off[1]}, nil
}

// decode converts little-endian values of dtype d to float32.
func decode(d DType, b []byte) ([]float32, error) {
	n := len(b) / d.Size()
	v := make([]float32, n)
	le := binary.LittleEndian
	switch d {
	case F32:
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
	case F16:
		for i := range v {
			v[i] = F16ToF32(le.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range v {
			v[i] = math.Float32frombits(uint32(le.Uint16(b[2*i:])) << 16)
		}
	case F64:
		for i := range v {
			v[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	case I64:
		for i := range v {
			x := int64(le.Uint64(b[8*i:]))
			if x > 1<<53 || x < -1<<53 || int64(float32(x)) != x {
				return nil, fmt.Errorf("I64 value %d (element %d) is not a whole number float32 holds exactly", x, i)
			}
			v[i] = float32(x)
		}
	case I32:
		for i := range v {
			x := int32(le.Uint32(b[4*i:]))
			if int64(float32(x)) != int64(x) {
				return nil, fmt.Errorf("I32 value %d (element %d) is not a whole number float32 holds exactly", x, i)
			}
			v[i] = float32(x)
		}
	}
	return v, nil
}

// F16ToF32 is the value of the IEEE binary16 bits h (exact).
func F16ToF32(h uint16) float32 {
	s := uint32(h&0x8000) << 16
	e := uint32(h>>10) & 0x1f
	m := uint32(h & 0x3ff)
	switch e {
	case 0: // zero and subnormals: m * 2^-24
		f := float32(m) / (1 << 24)
		return math.Float32frombits(s | math.Float32bits(f))
	case 0x1f: // Inf, NaN (payload kept)
		return math.Float32frombits(s | 0x7f800000 | m<<13)
	}
	return math.Float32frombits(s | (e+127-15)<<23 | m<<13)
}

// F32ToF16 is x rounded to the nearest binary16 value, ties to even
// (backend.RoundF16), as its bits; NaN gives the quiet NaN of its sign.
func F32ToF16(x float32) uint16 {
	r := math.Float32bits(backend.RoundF16(x))
	s := uint16(r>>16) & 0x8000
	a := r & 0x7fffffff
	switch {
	case a > 0x7f800000:
		return s | 0x7e00
	case a == 0x7f800000:
		return s | 0x7c00
	case a < 0x38800000: // a subnormal (or zero): an exact multiple of 2^-24
		return s | uint16(math.Float32frombits(a)*(1<<24))
	}
	return s | uint16((a>>23)-127+15)<<10 | uint16(a>>13)&0x3ff
}

// F32ToBF16 is x rounded to the nearest bfloat16 value, ties to even
// (backend.RoundBF16), as its bits; NaN gives the quiet NaN of its sign.
func F32ToBF16(x float32) uint16 {
	u := math.Float32bits(x)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16)&0x8000 | 0x7fc0
	}
	return uint16(math.Float32bits(backend.RoundBF16(x)) >> 16)
}

// Write writes f as a safetensors file: the header (metadata first, then
// the tensors in f's order, padded with spaces to a multiple of 8 bytes so
// that the data is aligned, as the reference implementation does), then
// each tensor's values in its DType. It checks everything before writing
// a byte: names unique and not MetadataKey, dtypes F32, F16 or BF16,
// shapes of dimensions >= 0 and at most 2^52 elements (what Read accepts)
// and as many values as they hold; such errors
// wrap ErrInvalid.
func Write(w io.Writer, f *File) error {
	var h bytes.Buffer
	enc := json.NewEncoder(&h)
	enc.SetEscapeHTML(false)
	h.WriteByte('{')
	for k, v := range f.Metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors.Write: metadata %q: %q: not UTF-8: %w", k, v, ErrInvalid)
		}
	}
	if len(f.Metadata) > 0 {
		h.WriteString(`"` + MetadataKey + `":`)
		if err := enc.Encode(f.Metadata); err != nil { // map keys sorted
			return fmt.Errorf("safetensors.Write: metadata: %w", err)
		}
		trimNewline(&h)
	}
	seen := map[string]bool{}
	var off uint64
	for i, t := range f.Tensors {
		dt := t.DType
		if dt == "" {
			dt = F32
		}
		if dt != F32 && dt != F16 && dt != BF16 {
			return fmt.Errorf("safetensors.Write: tensor %q: dtype %q, want F32, F16 or BF16: %w", t.Name, t.DType, ErrInvalid)
		}
		if t.Name == MetadataKey || seen[t.Name] || !utf8.ValidString(t.Name) {
			return fmt.Errorf("safetensors.Write: tensor %d's name %q is reserved, taken or not UTF-8: %w", i, t.Name, ErrInvalid)
		}
		seen[t.Name] = true
		n := 1
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("safetensors.Write: tensor %q: shape %v: %w", t.Name, t.Shape, ErrInvalid)
			}
			// Read's bound, checked before multiplying: a product that
			// overflows can wrap to len(Data) ([1<<32, 1<<32] to 0).
			if int64(d) > maxElems || d > 0 && int64(n) > maxElems/int64(d) {
				return fmt.Errorf("safetensors.Write: tensor %q: shape %v has over 2^52 elements: %w", t.Name, t.Shape, ErrInvalid)
			}
			n *= d
		}
		if n != len(t.Data) {
			return fmt.Errorf("safetensors.Write: tensor %q: shape %v holds %d values, Data has %d: %w", t.Name, t.Shape, n, len(t.Data), ErrInvalid)
		}
		if len(f.Metadata) > 0 || i > 0 {
			h.WriteByte(',')
		}
		enc.Encode(t.Name)
		trimNewline(&h)
		h.WriteString(`:{"dtype":"` + string(dt) + `","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		end := off + uint64(n*dt.Size())
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, end)
		off = end
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}
	bw := bufio.NewWriter(w)
	binary.Write(bw, binary.LittleEndian, uint64(h.Len()))
	bw.Write(h.Bytes())
	var b [4]byte
	le := binary.LittleEndian
	for _, t := range f.Tensors {
		switch t.DType {
		case F16:
			for _, x := range t.Data {
				le.PutUint16(b[:], F32ToF16(x))
				bw.Write(b[:2])
			}
		case BF16:
			for _, x := range t.Data {
				le.PutUint16(b[:], F32ToBF16(x))
				bw.Write(b[:2])
			}
		default:
			for _, x := range t.Data {
				le.PutUint32(b[:], math.Float32bits(x))
				bw.Write(b[:])
			}
		}
	}
	if err := bw.Flush(); err != nil { // bufio keeps the first write error
		return fmt.Errorf("safetensors.Write: %w", err)
	}
	return nil
}

func trimNewline(b *bytes.Buffer) { b.Truncate(b.Len() - 1) } // json.Encoder ends each value with '\n'
