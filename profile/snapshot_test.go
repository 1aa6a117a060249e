package profile

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"testing"
)

func TestSnapshotJSONRoundTrip(t *testing.T) {
	fresh(t)
	Forward(true)
	Backward(true)
	Count(true)
	eagerForward()
	Op(PassBackward, "matmul", msd(0.5))
	RecordRun(&Run{Site: "sync", Compute: msd(2), Download: msd(1), DownloadPass: PassBackward,
		Nodes: []NodeTime{{Op: "matmul", Pass: PassBackward, Dur: msd(1)}}})
	Xfer(Up, "inputs", 4096)
	Xfer(Down, "loss", 4)
	Launch("eager", 1)
	Launch("sync", 1)
	Step(msd(10))
	Step(msd(12))

	p := Snapshot()
	p.Device = "test device"
	// forward 9 + backward (0.5 create + 2 compute + 1 download) = 12.5 of 22 ms.
	if p.AttributedMS != 12.5 || p.StepTotalMS != 22 || p.CoveragePct != 100*12.5/22 {
		t.Errorf("attributed %v ms, steps %v ms, coverage %v%%; want 12.5, 22, %v",
			p.AttributedMS, p.StepTotalMS, p.CoveragePct, 100*12.5/22)
	}
	if !reflect.DeepEqual(p.StepMS, []float64{10, 12}) || p.Steps != 2 {
		t.Errorf("step_ms %v steps %d, want [10 12], 2", p.StepMS, p.Steps)
	}

	data, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("json.Marshal(Snapshot()): %v", err)
	}
	var back Profile
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatalf("json.Unmarshal: %v\n%s", err, data)
	}
	if !back.TakenAt.Equal(p.TakenAt) {
		t.Errorf("taken_at %v came back as %v", p.TakenAt, back.TakenAt)
	}
	back.TakenAt = p.TakenAt
	if !reflect.DeepEqual(&back, p) {
		t.Errorf("round trip changed the profile:\n got %+v\nwant %+v", &back, p)
	}

	// Every key snake_case; the page relies on the names.
	var generic any
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !snake.MatchString(k) {
					t.Errorf("key %q at %s is not snake_case", k, path)
				}
				walk(path+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(path+"[]", x)
			}
		}
	}
	walk("$", generic)
	for _, key := range []string{`"forward":{"pass":"forward","ops":2`, `"device":"test device"`,
		`{"dir":"up","site":"inputs","count":1,"bytes":4096}`, `"launches":{"sites":[`, `"schema":1`} {
		if !bytes.Contains(data, []byte(key)) {
			t.Errorf("JSON lacks %s:\n%s", key, data)
		}
	}
}

// TestSnapshotEmpty: an empty profile encodes with arrays, never null, and
// no NaN (json.Marshal fails on NaN).
func TestSnapshotEmpty(t *testing.T) {
	fresh(t)
	data, err := json.Marshal(Snapshot())
	if err != nil {
		t.Fatalf("json.Marshal(empty Snapshot()): %v", err)
	}
	if bytes.Contains(data, []byte("null")) {
		t.Errorf("empty snapshot has null: %s", data)
	}
}

func TestStepRing(t *testing.T) {
	fresh(t)
	Forward(true)
	for i := range maxSteps + 10 {
		Step(msd(float64(i)))
	}
	p := Snapshot()
	if p.Steps != maxSteps+10 || len(p.StepMS) != maxSteps || p.StepMS[0] != 10 || p.StepMS[maxSteps-1] != maxSteps+9 {
		t.Errorf("steps %d, kept %d, first %v last %v; want %d, %d, 10, %d",
			p.Steps, len(p.StepMS), p.StepMS[0], p.StepMS[len(p.StepMS)-1], maxSteps+10, maxSteps, maxSteps+9)
	}
	// 0+1+...+(maxSteps+9) ms
	if want := float64((maxSteps+10)*(maxSteps+9)) / 2; p.StepTotalMS != want {
		t.Errorf("step total %v ms, want %v", p.StepTotalMS, want)
	}
}
