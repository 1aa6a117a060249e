package buffer

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// Seed case 9: a pending read keeps its buffer alive: a buffer dropped by its
// owner is not collected while a recorded GetRows node still reads it, and is
// collected, its device memory freed, once that node has run.
func TestPendingReadKeepsBufferAlive(t *testing.T) {
	const width, capacity = 8, 10000 // 320 KB, far above the other values here
	dev := open(t)
	b := mustNew(t, dev, width, capacity)
	recs := vals(width*2, 1)
	if err := b.Write(capacity-2, recs); err != nil {
		t.Fatal(err)
	}
	y, err := b.GetRows([]int{capacity - 1, capacity - 2})
	if err != nil {
		t.Fatal(err)
	}
	collected := make(chan struct{})
	runtime.AddCleanup(b.table, func(c chan struct{}) { close(c) }, collected)
	b = nil // the only owner lets go; the pending node still holds the table
	for range 5 {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	select {
	case <-collected:
		t.Fatal("the table was collected while a pending node reads it")
	default:
	}
	got, err := y.Data()
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(recs[width:]), recs[:width]...); !slices.Equal(got, want) {
		t.Fatalf("pending read after GC = %v, want %v", got, want)
	}

	// The node has run: nothing holds the table now.
	deadline := time.Now().Add(10 * time.Second)
	for done := false; !done; {
		runtime.GC()
		select {
		case <-collected:
			done = true
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the table was not collected after its reader ran")
			}
		}
	}
	// core's cleanup of the same object was queued in the same cycle; give
	// it a moment, then Close: it frees collected values before rescuing
	// the live ones, so the table's bytes must not be downloaded.
	for range 5 {
		runtime.GC()
		time.Sleep(2 * time.Millisecond)
	}
	d0 := dev.Stats().DownBytes
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	if n := dev.Stats().DownBytes - d0; n >= 4*width*capacity {
		t.Fatalf("Close rescued %d bytes: the collected buffer (%d bytes) was still live", n, 4*width*capacity)
	}
}

// Seed case 10: Device.Close moves the buffer to the host and keeps its value;
// the next use on the device uploads it again.
func TestCloseKeepsValue(t *testing.T) {
	dev := open(t)
	b := mustNew(t, dev, 3, 10)
	defer b.Free()
	recs := vals(30, -4)
	if err := b.Write(0, recs); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name  string
		do    func() error
		where string
		gen   int // Generation after the step, relative to the start
	}{
		{"written", func() error { return nil }, "device", 0},
		{"closed", dev.Close, "host", 0},
		{"read on the host", func() error {
			got, err := b.Read(0, 10)
			if err == nil && !slices.Equal(got, recs) {
				t.Errorf("Read after Close = %v, want %v", got, recs)
			}
			return err
		}, "host", 0},
		{"gathered on the device", func() error {
			y, err := b.GetRows([]int{9, 0})
			if err != nil {
				return err
			}
			got, err := y.Data()
			if want := append(slices.Clone(recs[27:]), recs[:3]...); err == nil && !slices.Equal(got, want) {
				t.Errorf("GetRows after Close = %v, want %v", got, want)
			}
			return err
		}, "device", 1},
		{"closed again", dev.Close, "host", 1},
		{"written on the host's copy", func() error { return b.Write(4, vals(3, 100)) }, "device", 2},
	}
	g0 := dev.Generation()
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got, want := b.String(), "<buffer> 3 x 10 f32 ("+s.where+")"; got != want {
			t.Errorf("%s: String = %q, want %q", s.name, got, want)
		}
		if g := dev.Generation() - g0; g != s.gen {
			t.Errorf("%s: %d generations later, want %d", s.name, g, s.gen)
		}
	}
	copy(recs[12:], vals(3, 100))
	if got, err := b.Read(0, 10); err != nil || !slices.Equal(got, recs) {
		t.Fatalf("final value %v, %v; want %v", got, err, recs)
	}
}

// Close rescues a buffer in 16 MB parts, and when one part fails to download
// Close fails and frees nothing: the buffer stays on the device, intact.
func TestCloseFailsAndFreesNothing(t *testing.T) {
	const width, capacity = 1024, 4097 // 16 MB + one record: two parts
	const part = 4 << 20               // floats per part (16 MB)
	dev := openFaulty(t, 0, 0)
	b := mustNew(t, dev, width, capacity)
	defer b.Free()
	first, last := vals(width, 1), vals(width, -3)
	if err := b.Write(0, first); err != nil {
		t.Fatal(err)
	}
	if err := b.Write(capacity-1, last); err != nil {
		t.Fatal(err)
	}
	resetReads := func() {
		faults.mu.Lock()
		faults.reads = nil
		faults.mu.Unlock()
	}
	setFail := func(from int) {
		faults.mu.Lock()
		faults.failReadFrom = from
		faults.mu.Unlock()
	}
	check := func(when string) {
		t.Helper()
		for _, c := range []struct {
			rec  int
			want []float32
		}{{0, first}, {capacity - 1, last}, {capacity / 2, make([]float32, width)}} {
			got, err := b.Read(c.rec, 1)
			if err != nil || !slices.Equal(got, c.want) {
				t.Fatalf("%s: record %d = %v..., %v", when, c.rec, got[:min(4, len(got))], err)
			}
		}
	}

	resetReads()
	setFail(1) // the second part fails
	err := dev.Close()
	if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), "was not released") {
		t.Fatalf("Close with a failing download: error %v", err)
	}
	if s := b.String(); s != "<buffer> 1024 x 4097 f32 (device)" {
		t.Fatalf("after the failed Close: String = %q", s)
	}
	setFail(-1)
	check("after the failed Close")

	resetReads()
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	faults.mu.Lock()
	reads := slices.Clone(faults.reads)
	faults.mu.Unlock()
	if want := []int{part, width*capacity - part}; !slices.Equal(reads, want) {
		t.Errorf("Close read the buffer in parts of %v floats, want %v", reads, want)
	}
	if s := b.String(); s != "<buffer> 1024 x 4097 f32 (host)" {
		t.Fatalf("after Close: String = %q", s)
	}
	check("after Close")
}

// Seed case 11: allocation is refused above 85% of the free memory the
// device reports, and above its largest buffer.
func TestRefusedAboveFreeMemory(t *testing.T) {
	dev := open(t)
	free, total, err := dev.Memory()
	if err != nil || total == 0 {
		t.Fatalf("the test device reports no memory: %d, %d, %v", free, total, err)
	}
	// A buffer of all the free memory (rounded up to a record) is refused
	// before anything is allocated.
	width := 1024
	capacity := int(free/uint64(4*width)) + 1
	if _, err := New(dev, width, capacity); !errors.Is(err, ErrTooLarge) ||
		!strings.Contains(err.Error(), "MB requested, the device reports") || !strings.Contains(err.Error(), "(85%) may be used. Reduce the capacity.") {
		t.Fatalf("New of %d x %d on %s: error %v, want ErrTooLarge", capacity, width, dev.Name(), err)
	}

	cases := []struct {
		name            string
		free            uint64
		maxElems        int
		width, capacity int
		msg             string // "": accepted
	}{
		{"below 85%", 10 << 20, 0, 256, 8000, ""},
		{"above 85%", 10 << 20, 0, 256, 9000,
			"buffer.New: 8.8 MB requested, the device reports 10.0 MB free, of which 8.5 MB (85%) may be used. Reduce the capacity."},
		{"at the largest buffer", 0, 1 << 20, 1024, 1024, ""},
		{"above the largest buffer", 0, 1 << 20, 1024, 1536,
			"buffer.New: 6.0 MB requested, the device's largest buffer holds 4.0 MB. Reduce the capacity."},
		{"overflowing int", 0, 0, 1 << 40, 1 << 40, "buffer.New: 1099511627776 x 1099511627776 records do not fit in an int"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dev := openFaulty(t, c.free, c.maxElems)
			b, err := New(dev, c.width, c.capacity)
			if c.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				if err := b.Write(c.capacity-1, vals(c.width, 1)); err != nil {
					t.Fatal(err)
				}
				b.Free()
				return
			}
			if !errors.Is(err, ErrTooLarge) || err.Error() != c.msg {
				t.Fatalf("error %v, want ErrTooLarge with %q", err, c.msg)
			}
		})
	}
}
