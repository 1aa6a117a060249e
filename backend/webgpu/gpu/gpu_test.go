package gpu

import (
	"errors"
	"slices"
	"testing"

	"github.com/ag-go/ag/backend/backendtest/testenv"
)

// TestInChunks: the chunks cover the data in order, none larger than
// MaxStaging, each at its own offset; an error stops the walk.
func TestInChunks(t *testing.T) {
	data := make([]byte, 2*MaxStaging+5)
	var offs []uint64
	var sizes []int
	err := inChunks(100, data, func(off uint64, c []byte) error {
		if &c[0] != &data[off-100] {
			t.Errorf("chunk at %d does not view data[%d]", off, off-100)
		}
		offs, sizes = append(offs, off), append(sizes, len(c))
		return nil
	})
	if err != nil || !slices.Equal(offs, []uint64{100, 100 + MaxStaging, 100 + 2*MaxStaging}) || !slices.Equal(sizes, []int{MaxStaging, MaxStaging, 5}) {
		t.Fatalf("chunks at %v of %v bytes (err %v), want at 100, 100+64Mi, 100+128Mi of 64Mi, 64Mi, 5", offs, sizes, err)
	}
	stop := errors.New("stop")
	calls := 0
	if err := inChunks(0, data, func(uint64, []byte) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("a failing chunk: err %v after %d calls, want stop after 1", err, calls)
	}
	if err := inChunks(0, nil, func(uint64, []byte) error { t.Fatal("called for no data"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestWithFewer: a refused request is retried without the last feature
// until one succeeds or none is left.
func TestWithFewer(t *testing.T) {
	var asked [][]string
	refuse := func(bad string) func([]string) error {
		return func(f []string) error {
			asked = append(asked, slices.Clone(f))
			if slices.Contains(f, bad) || bad == "all" {
				return errors.New("refused")
			}
			return nil
		}
	}
	got, err := withFewer([]string{"ts", "f16"}, refuse("f16"))
	if err != nil || !slices.Equal(got, []string{"ts"}) || len(asked) != 2 {
		t.Fatalf("f16 refused: got %v, err %v after %v; want [ts]", got, err, asked)
	}
	asked = nil
	got, err = withFewer([]string{"ts", "f16"}, refuse("all"))
	if err == nil || len(got) != 0 || len(asked) != 3 {
		t.Fatalf("all refused: got %v, err %v after %v; want the error after three requests", got, err, asked)
	}
}

// TestRoundTrip writes, reads and reads later through a device: chunks at
// offsets, a read behind a copy, and more reads in flight than MaxLater.
func TestRoundTrip(t *testing.T) {
	d, err := Open()
	if err != nil {
		testenv.SkipDevice(t, "webgpu", err.Error())
	}
	defer d.Close()
	a, err := d.NewBuffer(1024)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.NewBuffer(1024)
	if err != nil {
		t.Fatal(err)
	}
	if a.Size() != 1024 {
		t.Fatalf("Size %d, want 1024", a.Size())
	}
	src := make([]uint32, 256)
	for i := range src {
		src[i] = uint32(3*i + 1)
	}
	if err := d.Write(a, 0, BytesOf(src)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Run(nil, []CopyOp{{Src: a, Dst: b, SrcOff: 16, DstOff: 0, Size: 512}}, false); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, 128)
	if err := d.Read(b, 0, BytesOf(got)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, src[4:132]) {
		t.Fatalf("after the copy b[:4] = %v, want %v", got[:4], src[4:8])
	}
	var reads []PendingRead
	outs := make([][]uint32, MaxLater+3)
	for i := range outs {
		outs[i] = make([]uint32, 2)
		r, err := d.ReadLater(a, uint64(8*(i%128)), BytesOf(outs[i]))
		if err != nil || r == nil {
			t.Fatalf("ReadLater %d: %v, %v", i, r, err)
		}
		reads = append(reads, r)
	}
	for i, r := range reads {
		if err := r.Finish(r.Await(), false); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if k := 2 * (i % 128); !slices.Equal(outs[i], src[k:k+2]) {
			t.Fatalf("read %d: %v, want %v", i, outs[i], src[k:k+2])
		}
	}
	d.DestroyBuffer(a)
	d.DestroyBuffer(b)
}
