package gpu

import (
	"errors"
	"runtime"
	"slices"
	"sync"
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

// TestMappingSurvivesCollection reads, reads later and times runs while
// another goroutine collects garbage and reuses the freed memory without
// pause: a mapping's state must not live in memory the collector can free
// before wgpu calls back (see mapping). The binding's own MapAsync crashed
// here ("misuse of an invalid Handle").
func TestMappingSurvivesCollection(t *testing.T) {
	d, err := Open()
	if err != nil {
		testenv.SkipDevice(t, "webgpu", err.Error())
	}
	defer d.Close()
	const n = 1 << 20
	a, err := d.NewBuffer(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer d.DestroyBuffer(a)
	b, err := d.NewBuffer(64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.DestroyBuffer(b)
	src := make([]uint32, n)
	for i := range src {
		src[i] = uint32(i)
	}
	if err := d.Write(a, 0, BytesOf(src)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var keep [64]*[2]uint64
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			for j := range keep { // small pointer-free objects take the freed cells
				keep[j] = &[2]uint64{^uint64(i), ^uint64(j)}
			}
			runtime.GC()
		}
	})
	defer func() { close(stop); wg.Wait() }()
	got := make([]uint32, n)
	for k := range 40 {
		if err := d.Read(a, 0, BytesOf(got)); err != nil {
			t.Fatalf("read %d: %v", k, err)
		}
		if got[n-1] != n-1 {
			t.Fatalf("read %d: last element %d, want %d", k, got[n-1], n-1)
		}
		r, err := d.ReadLater(a, 4*uint64(k), BytesOf(got[:2]))
		if err != nil {
			t.Fatal(err)
		}
		rb := &ReadBack{Src: b, Dst: BytesOf(got[2:6])}
		if _, err := d.RunRead(nil, []CopyOp{{Src: a, Dst: b, SrcOff: 4 * uint64(k), Size: 16}}, d.Info().Timestamps, rb); err != nil {
			t.Fatalf("timed run %d: %v", k, err)
		}
		if got[2] != uint32(k) || got[5] != uint32(k+3) {
			t.Fatalf("run %d read %v, want %d..%d", k, got[2:6], k, k+3)
		}
		if err := r.Finish(r.Await(), false); err != nil || got[0] != uint32(k) {
			t.Fatalf("later read %d: %v, %v; want %d", k, got[:2], err, k)
		}
	}
}
