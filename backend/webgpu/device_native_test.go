//go:build !js

package webgpu

import (
	"testing"
	"time"

	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// busyKernel keeps every invocation busy for P[0] iterations of x = x/2 + 1
// (which reaches 2 exactly) and stores x into Y[i % 1024].
func busyKernel() *kernel {
	return newKernel("busy", []bindDecl{{name: "Y", rw: true}}, `
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
	let i = (wid.y * nwg.x + wid.x) * 64u + lid;
	var x = f32(i % 7u);
	for (var k = 0u; k < P[0]; k = k + 1u) { x = x * 0.5 + 1.0; }
	Y[i % 1024u] = x;
}
`)
}

// TestLongRunWait runs one dispatch that takes longer than the 5 s after
// which wgpu's blocking poll gives up and treats a submission as done
// (freeing its command buffers while the device still runs them: the
// lavapipe crash of issue 10 item 15). The run must return only when the
// work is done: a read right after it is quick and sees the results.
func TestLongRunWait(t *testing.T) {
	if testing.Short() {
		t.Skip("a run of more than 5 s skipped under -short")
	}
	be := openTest(t)
	be.mu.Lock()
	defer be.mu.Unlock()
	pipe, err := be.pipeline(busyKernel())
	if err != nil {
		t.Fatal(err)
	}
	pb, err := be.newBuffer(4)
	if err != nil {
		t.Fatal(err)
	}
	defer be.destroy(pb)
	yb, err := be.newBuffer(4096)
	if err != nil {
		t.Fatal(err)
	}
	defer be.destroy(yb)
	const iters = 50000 // below lavapipe's 65535 loop iterations
	if err := be.d.Write(pb, 0, gpu.BytesOf([]uint32{iters})); err != nil {
		t.Fatal(err)
	}
	bg, err := be.d.NewBindGroup(pipe, []gpu.BindEntry{{Buf: pb, Size: 4}, {Buf: yb, Size: 4096}})
	if err != nil {
		t.Fatal(err)
	}
	defer be.d.ReleaseBindGroup(bg)
	run := func(groups int) time.Duration {
		x := min(groups, int(be.info.MaxWGPerDim))
		start := time.Now()
		if _, err := be.d.Run([][]gpu.Dispatch{{{Pipe: pipe, Bind: bg, X: uint32(x), Y: uint32(ceilDiv(groups, x)), Z: 1}}}, nil, false); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	// Calibrate: the number of workgroups that takes about 8 s here, again
	// when the machine's load changed (a run that returns after wgpu's 5 s
	// with its work unfinished fails at once: its read is slow).
	groups := 16
	for d := run(groups); d < 500*time.Millisecond; d = run(groups) {
		groups *= 4
	}
	d := run(groups)
	for range 3 {
		groups = int(float64(groups) * float64(8*time.Second) / float64(max(d, time.Millisecond)))
		d = run(groups)
		// The truth, whatever the machine's load: the queue is empty when
		// the run returns (a read's time said so by the clock, and a
		// loaded machine can slow a 4 KB read past any bound).
		if !gpu.QueueEmpty(be.d) {
			t.Fatalf("a run of %v returned with its work still on the queue", d)
		}
		start := time.Now()
		out := make([]float32, 1024)
		if err := be.d.Read(yb, 0, gpu.BytesOf(out)); err != nil {
			t.Fatal(err)
		}
		read := time.Since(start)
		for i, x := range out {
			if x != 2 {
				t.Fatalf("Y[%d] = %g after the run, want 2", i, x)
			}
		}
		t.Logf("%d workgroups: run %v, read after it %v", groups, d, read)
		if d > 5500*time.Millisecond {
			return
		}
	}
	t.Skipf("no run took more than wgpu's 5 s blocking wait here: nothing to check on %s", be.info)
}
