package core

import (
	"math"
	"testing"
)

// RMSNorm and BatchNorm agree with their definitions written out here
// (values, and the specials of a row or a channel), and their gradients
// (the composites rms_norm_back and batch_norm_back) with central
// differences, on every backend.
func TestRMSNormBatchNorm(t *testing.T) {
	inf := math.Inf(1)
	// rows of 4: plain; a zero row (eps alone divides); a NaN; an infinity
	x := []float64{1, -2, 3, 0.5, 0, 0, 0, 0, 1, math.NaN(), 2, 3, 1, -inf, 2, -3}
	const eps = 1e-5
	wantRMS := make([]float64, len(x))
	for r := 0; r < 4; r++ {
		ms := 0.0
		for _, v := range x[r*4 : r*4+4] {
			ms += v * v / 4
		}
		for k := r * 4; k < r*4+4; k++ {
			wantRMS[k] = x[k] / math.Sqrt(ms+eps)
		}
	}
	// [N 2, C 2, L 4] of x's values: channel 0 holds rows 0 and 2 (a NaN:
	// all NaN), channel 1 rows 1 and 3 (an infinity: all NaN)
	bnX := []float64{1, -2, 3, 0.5, 0, 0, 0, 0, 4, 1.5, 2, 3, 1, 0.25, 2, -3}
	wantBN := make([]float64, len(bnX))
	for c := 0; c < 2; c++ {
		var vals []float64
		for n := 0; n < 2; n++ {
			vals = append(vals, bnX[(n*2+c)*4:(n*2+c)*4+4]...)
		}
		mean, v := 0.0, 0.0
		for _, e := range vals {
			mean += e / 8
		}
		for _, e := range vals {
			v += (e - mean) * (e - mean) / 8
		}
		for n := 0; n < 2; n++ {
			for k := (n*2 + c) * 4; k < (n*2+c)*4+4; k++ {
				wantBN[k] = (bnX[k] - mean) / math.Sqrt(v+eps)
			}
		}
	}
	eachDevice(t, func(t *testing.T, dev *Device) {
		check := func(name string, got []float32, err error, want []float64) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for i, w := range want {
				if !same(got[i], w, 1e-5) {
					t.Errorf("%s: element %d = %g, want %g", name, i, got[i], w)
				}
			}
		}
		got, err := RMSNorm(dev.Tensor(f32s(x), 4, 4), eps).Data()
		check("RMSNorm", got, err, wantRMS)
		got, err = BatchNorm(dev.Tensor(f32s(bnX), 2, 2, 4), eps).Data()
		check("BatchNorm", got, err, wantBN)
		bad := append([]float64(nil), bnX...)
		bad[2], bad[13] = math.NaN(), -inf // channel 0 and channel 1
		got, err = BatchNorm(dev.Tensor(f32s(bad), 2, 2, 4), eps).Data()
		nans := make([]float64, len(bad))
		for i := range nans {
			nans[i] = math.NaN()
		}
		check("BatchNorm with specials", got, err, nans)

		xs := []float32{0.3, -1.2, 0.8, 2, -0.1, 0.5, 1.5, -0.7, 0.2, 0.9, -2, 0.4}
		wt := dev.Tensor([]float32{1, -2, 0.5, 3, 0.25, -1, 2, 1, -0.5, 0.75, -3, 1.5}, 2, 3, 2)
		xp := dev.Param(xs, 2, 3, 2)
		if err := Gradcheck(func() *Tensor { return Sum(Mul(RMSNorm(xp, 1e-3), wt)) }, []*Tensor{xp}, nil); err != nil {
			t.Errorf("RMSNorm: %v", err)
		}
		if err := Gradcheck(func() *Tensor { return Sum(Mul(BatchNorm(xp, 1e-3), wt)) }, []*Tensor{xp}, nil); err != nil {
			t.Errorf("BatchNorm: %v", err)
		}
		x4 := dev.Param(xs, 2, 2, 3, 1)
		w4 := Reshape(wt, 2, 2, 3, 1)
		if err := Gradcheck(func() *Tensor { return Sum(Mul(BatchNorm(x4, 1e-3), w4)) }, []*Tensor{x4}, nil); err != nil {
			t.Errorf("BatchNorm of rank 4: %v", err)
		}
		// the batch's mean and variance: their values, and their gradient
		// through both rows
		got, err = BatchNormStats(dev.Tensor(f32s(bnX), 2, 2, 4)).Data()
		wantStats := make([]float64, 4)
		for ch := range 2 {
			var vals []float64
			for b := range 2 {
				vals = append(vals, bnX[(b*2+ch)*4:(b*2+ch+1)*4]...)
			}
			m, v := 0.0, 0.0
			for _, e := range vals {
				m += e / float64(len(vals))
			}
			for _, e := range vals {
				v += (e - m) * (e - m) / float64(len(vals))
			}
			wantStats[ch], wantStats[2+ch] = m, v
		}
		check("BatchNormStats", got, err, wantStats)
		ws := dev.Tensor([]float32{1.5, -2, 0.75, 3}, 2, 2)
		if err := Gradcheck(func() *Tensor { return Sum(Mul(BatchNormStats(x4), ws)) }, []*Tensor{x4}, nil); err != nil {
			t.Errorf("BatchNormStats: %v", err)
		}
	})
}
