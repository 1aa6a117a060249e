package profile_test

import (
	"os"
	"time"

	"github.com/ag-go/ag/profile"
)

// Core's side of one eager op and the report that follows.
func ExampleReportForward() {
	profile.Reset()
	profile.Forward(true)
	defer profile.Forward(false)

	if profile.Enabled(profile.PassForward) { // one branch when off
		profile.Op(profile.PassForward, "matmul", 200*time.Microsecond)
		profile.RecordRun(&profile.Run{Site: "eager",
			Upload: 1 * time.Millisecond, Compute: 2 * time.Millisecond, Download: 800 * time.Microsecond,
			Nodes: []profile.NodeTime{{Op: "matmul", Pass: profile.PassForward}}})
	}
	profile.ReportForward(os.Stdout)
	// Output:
	// forward: 1 operations (1 calls), 4.00 ms total, 4.000 ms per op
	//   compute       2.00 ms   50.0%
	//   upload        1.00 ms   25.0%
	//   download      0.80 ms   20.0%
	//   create        0.20 ms    5.0%
	//   -> transfer (upload+download) 45.0% of the forward
	//   -> a resident forward could not beat 1.82x on this workload
}
