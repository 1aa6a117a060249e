package webgpu

import (
	"testing"

	"github.com/ag-go/ag/backend/webgpu/gpu"
)

// TestPickMatmul pins the tiling rules on a device where every tiling fits
// and on one with WebGPU's default limits.
func TestPickMatmul(t *testing.T) {
	big := gpu.Info{MaxInvocations: 1024, MaxWGSizeX: 1024, MaxWGStorage: 48 << 10, MaxBuffer: 1 << 40, StorageAlign: 256}
	base := gpu.Info{MaxInvocations: 256, MaxWGSizeX: 256, MaxWGStorage: 16 << 10}
	const part = 1 << 30
	for _, tc := range []struct {
		name           string
		info           gpu.Info
		m, n, k        int
		transA, transB bool
		want           mmPlan
		wantReason     string
	}{
		{"square 4096", big, 4096, 4096, 4096, false, false, mmPlan{cfg: mmTN, split: 1, tA: true}, "A transposed first, then the TN tiles"},
		{"square 4096 NT", big, 4096, 4096, 4096, false, true, mmPlan{cfg: mmTN, split: 1, tA: true, tB: true}, "both transposed first"},
		{"square 4096 TN", big, 4096, 4096, 4096, true, false, mmPlan{cfg: mmTN, split: 1}, "the TN tiles as stored"},
		{"square 4096 TT", big, 4096, 4096, 4096, true, true, mmPlan{cfg: mmTN, split: 1, tB: true}, "B transposed first from 2048 rows of A"},
		{"batch 2048 dX", big, 2048, 1024, 1024, false, true, mmPlan{cfg: mmWide, split: 1, tB: true}, "B transposed first from 2048 rows; 2^31 multiply-adds are too few to copy A too"},
		{"batch 4096 dX", big, 4096, 1024, 1024, false, true, mmPlan{cfg: mmTN, split: 1, tA: true, tB: true}, "2^32 multiply-adds: both copied"},
		{"batch 4096 forward", big, 4096, 1024, 1024, false, false, mmPlan{cfg: mmWide, split: 1}, "N = 1024: copying A costs what the TN tiles gain"},
		{"batch 1024, 4096 wide", big, 1024, 4096, 4096, false, false, mmPlan{cfg: mmTN, split: 1, tA: true}, "N = 4096: A copied"},
		{"default limits", base, 4096, 4096, 4096, false, false, mmPlan{cfg: mmLarge, split: 1}, "the wide and TN tiles need more than 16 KiB of workgroup memory"},
		{"square 1024", big, 1024, 1024, 1024, false, false, mmPlan{cfg: mmWide, split: 2}, "middle-sized: wide tiles, K in two"},
		{"square 1024 NT", big, 1024, 1024, 1024, false, true, mmPlan{cfg: mmWide, split: 2}, "middle-sized: wide tiles also with B transposed"},
		{"square 1024 TN", big, 1024, 1024, 1024, true, false, mmPlan{cfg: mmWide, split: 2}, "2^30 multiply-adds are too few for the TN tiles"},
		{"batch 2048 forward", big, 2048, 1024, 1024, false, false, mmPlan{cfg: mmWide, split: 1}, "two waves of wide tiles unsplit"},
		{"batch 512 forward", big, 512, 1024, 1024, false, false, mmPlan{cfg: mmWide, split: 4}, "K in four parts of 256"},
		{"shallow weight gradient", big, 1024, 1024, 256, false, false, mmPlan{cfg: mmMedium, split: 1}, "parts of 128 would be too shallow"},
		{"shallow weight gradient TN", big, 1024, 1024, 256, true, false, mmPlan{cfg: mmMedium, split: 1}, "K = 256 is too short for the TN tiles"},
		{"middle-sized, default limits", base, 1024, 1024, 1024, false, false, mmPlan{cfg: mmMedium, split: 1}, "no wide tiles in 16 KiB: the medium ones"},
		{"deep weight gradient", big, 1024, 1024, 4096, false, false, mmPlan{cfg: mmWide, split: 2}, "K split in two fills the GPU with wide tiles"},
		{"deep weight gradient TN", big, 1024, 1024, 4096, true, false, mmPlan{cfg: mmTN, split: 2}, "TN tiles as stored, K in two"},
		{"deep NT", big, 1024, 1024, 4096, false, true, mmPlan{cfg: mmTN, split: 2, tA: true, tB: true}, "2^32 multiply-adds: both copied, K in two"},
		{"deep but the parts would be shallow", big, 256, 256, 2048, false, false, mmPlan{cfg: mmSmall, split: 16}, "a wide split would need parts under 512"},
		{"skinny", big, 64, 1024, 1024, false, false, mmPlan{cfg: mmSmall, split: 16}, "the small tiles with K split"},
	} {
		if got := pickMatmul(tc.info, true, tc.m, tc.n, tc.k, 1, tc.transA, tc.transB, part); got != tc.want {
			t.Errorf("%s: pickMatmul(gpu, %dx%dx%d, transA %v, transB %v) = %+v, want %+v (%s)", tc.name, tc.m, tc.n, tc.k, tc.transA, tc.transB,
				got, tc.want, tc.wantReason)
		}
	}
	// An operand an epilogue reads is not copied: A of a wide NN product
	// then runs as stored.
	if got := pickMatmulTB(big, true, 4096, 4096, 4096, 1, false, false, part, tbMinRows, false); got.tA || got.cfg != mmWide {
		t.Errorf("pickMatmulTB(gpu, 4096^3 NN, A not to be copied) = %+v, want mmWide as stored", got)
	}
	// Both copies must fit in one buffer: 2 x 64 MiB do not in 100 MiB.
	small := big
	small.MaxBuffer = 100 << 20
	if got := pickMatmul(small, true, 4096, 4096, 4096, 1, false, true, part); got.tA || got.cfg == mmTN {
		t.Errorf("pickMatmul(gpu with 100 MiB buffers, 4096^3 NT) = %+v, want no TN copies", got)
	}
	// The transposed copies must fit in a binding: 4096x4096 (64 MiB)
	// does not in 32 MiB.
	if got := pickMatmul(big, true, 4096, 4096, 4096, 1, false, true, 32<<20); got.tB || got.tA {
		t.Errorf("pickMatmul(gpu, 4096^3 NT, 32 MiB bindings) = %+v, want no operand transposed first", got)
	}
}

// TestPickMatmulSoftware: a software adapter runs every product unsplit
// (the invocation-loop limit can still split it, later), as mmSoft tiles
// where the vec4 kernel applies.
func TestPickMatmulSoftware(t *testing.T) {
	info := gpu.Info{MaxInvocations: 256, MaxWGSizeX: 256, MaxWGStorage: 16 << 10}
	for _, s := range [][3]int{{64, 256, 256}, {4096, 4096, 4096}, {4, 4, 4}, {1024, 1024, 4096}, {1, 1, 1}, {64, 256, 255}} {
		want := mmPlan{cfg: mmSoft, split: 1}
		if s[0]%4 != 0 || s[2]%4 != 0 || s[1]%4 != 0 {
			want = mmPlan{cfg: mmSmall, split: 1} // mmSoft's scalar kernel is not used (see pickMatmul)
		}
		if got := pickMatmul(info, false, s[0], s[1], s[2], 1, false, false, 1<<30); got != want {
			t.Errorf("pickMatmul(software, %v) = %s/%d, want %s/1", s, got.cfg, got.split, want.cfg)
		}
	}
}
