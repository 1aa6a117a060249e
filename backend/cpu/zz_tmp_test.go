package cpu
import ("testing";"time";"math/rand/v2";"math")
func TestTmpGemm(t *testing.T) {
	for _, k := range kernels()[:2] {
	for _, sz := range []int{256, 512, 1024} {
	for _, tr := range [][2]bool{{false,false},{true,false},{false,true}} {
		c := New()
		m, n, kk := sz, sz, sz
		g := newGemm(c, k, 1, m, n, kk, tr[0], tr[1])
		a := make([]float32, m*kk); b := make([]float32, kk*n); out := make([]float32, m*n)
		r := rand.New(rand.NewPCG(1,2))
		for i := range a { a[i] = r.Float32() }
		for i := range b { b[i] = r.Float32() }
		g.run(a, b, out)
		// check some entries
		for s := 0; s < 20; s++ {
			i, j := r.IntN(m), r.IntN(n)
			var ref float64
			for p := 0; p < kk; p++ {
				av := a[i*g.rsA+p*g.csA]; bv := b[p*g.rsB+j*g.csB]
				ref += float64(av)*float64(bv)
			}
			if math.Abs(ref-float64(out[i*n+j])) > 1e-4*math.Abs(ref)+1e-3 { t.Fatalf("%v %d %v: (%d,%d) %v vs %v", k.name, sz, tr, i, j, out[i*n+j], ref) }
		}
		reps := 20
		if sz < 1024 { reps = 100 }
		st := time.Now()
		for i := 0; i < reps; i++ { g.run(a, b, out) }
		el := time.Since(st)
		t.Logf("%s %d %v: %.1f GFLOP/s", k.name, sz, tr, 2*float64(m*n*kk)*float64(reps)/el.Seconds()/1e9)
	}}}
}
