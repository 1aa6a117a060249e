package backendtest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ag-go/ag/backend"
	"github.com/ag-go/ag/backend/backendtest/testenv"
)

func init() {
	backend.Register("backendtest-ref", 0, ReferenceDriver("backendtest-ref"))
	backend.Register("backendtest-broken", 0, refDriver{name: "ref", brk: os.Getenv("BACKENDTEST_BREAK")})
}

// TestSuiteOnReference runs the whole suite on the Eval-backed backend.
func TestSuiteOnReference(t *testing.T) { Run(t, "backendtest-ref") }

// TestSuiteSkipsUnknown: an unregistered name is a skip, not a failure.
func TestSuiteSkipsUnknown(t *testing.T) {
	t.Setenv(testenv.SkipLogEnv, "") // an expected skip: keep it out of make test's list
	ok := t.Run("unknown", func(t *testing.T) {
		Run(t, "no-such-backend")
		t.Error("Run did not skip an unregistered driver")
	})
	if !ok {
		t.Fatal("Run failed on an unregistered driver instead of skipping")
	}
}

// TestBrokenHelper is run by TestSuiteCatchesBugs in a child process.
func TestBrokenHelper(t *testing.T) {
	if os.Getenv("BACKENDTEST_BREAK") == "" {
		t.Skip("only run as a child of TestSuiteCatchesBugs")
	}
	Run(t, "backendtest-broken")
}

// TestSuiteCatchesBugs breaks the reference backend in small ways and checks
// the suite fails on them: an index bug (swapped elements), a relative
// error of 1e-4 (well inside what a plain visual check would accept), a NaN
// turned into 0 and an infinity of the wrong sign.
func TestSuiteCatchesBugs(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns test processes")
	}
	cases := []struct{ brk, sub string }{
		{"swap", "matmul/transB"}, {"swap", "get_rows"}, {"swap", "sum/axis2"}, {"swap", "permute"},
		{"swap", "graph/mlp-forward"}, {"scale", "add/broadcast"}, {"scale", "exp"},
		{"scale", "adamw/3steps"}, {"scale", "softmax/large"}, {"scale", "graph/reuse-new-data"},
		{"nan0", "special/relu"}, {"nan0", "special/max"}, {"nan0", "special/matmul"},
		{"infsign", "special/exp"}, {"infsign", "special/binary"},
	}
	for _, c := range cases {
		pat := "^TestBrokenHelper$"
		for _, part := range strings.Split(c.sub, "/") {
			pat += "/^" + part + "$"
		}
		cmd := exec.Command(os.Args[0], "-test.run", pat, "-test.short")
		cmd.Env = append(os.Environ(), "BACKENDTEST_BREAK="+c.brk)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "out of tolerance") {
			t.Errorf("%s broken by %s: suite did not fail with 'out of tolerance' (err %v):\n%s", c.sub, c.brk, err, out)
		}
	}
}
