package pageapi

import "testing"

// "best" (or "") is webgpu when its driver says it runs here, else cpu; a
// device named is kept.
func TestPickDevice(t *testing.T) {
	tests := []struct {
		ask     string
		drivers []DriverJSON
		want    string
	}{
		{"best", []DriverJSON{{Name: "webgpu", OK: true}, {Name: "cpu", OK: true}}, "webgpu"},
		{"", []DriverJSON{{Name: "webgpu", OK: false}, {Name: "cpu", OK: true}}, "cpu"},
		{"best", []DriverJSON{{Name: "cpu", OK: true}}, "cpu"},
		{"cpu", []DriverJSON{{Name: "webgpu", OK: true}}, "cpu"},
	}
	for _, tt := range tests {
		if got := PickDevice(tt.ask, tt.drivers); got != tt.want {
			t.Errorf("PickDevice(%q, %v) = %q, want %q", tt.ask, tt.drivers, got, tt.want)
		}
	}
}
