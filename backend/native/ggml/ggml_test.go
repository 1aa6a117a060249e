package ggml

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The embedded recipe names the same prefix as the repository's build.sh
// (what `make vulkan` builds and the Makefile links), so `ag ggml` run from
// a user's module finds the build the Makefile made, and the recipe holds
// every file of the folder that build.sh reads.
func TestFindMatchesMake(t *testing.T) {
	want, err := exec.Command("bash", "build.sh", "--print-prefix").Output()
	if err != nil {
		t.Fatalf("bash build.sh --print-prefix: %v", err)
	}
	b, err := Find()
	if err != nil {
		t.Fatal(err)
	}
	if b.Prefix != strings.TrimSpace(string(want)) {
		t.Errorf("Find().Prefix = %s, build.sh says %s", b.Prefix, want)
	}
	_, err = os.Stat(b.Prefix + "/.built")
	if b.Built != (err == nil) {
		t.Errorf("Find().Built = %t, the stamp's stat says %v", b.Built, err)
	}
	names, err := files()
	if err != nil {
		t.Fatal(err)
	}
	patches, _ := os.ReadDir("patches")
	if len(names) != 3+len(patches) {
		t.Errorf("recipe holds %v, want build.sh, glslc.sh, CMakeLists.txt and the %d patches", names, len(patches))
	}
	env := strings.Join(b.Env(), " ")
	for _, w := range []string{"CGO_CFLAGS=-I" + b.Prefix + "/include", "CGO_LDFLAGS=-L" + b.Prefix + "/lib", "-tags=ggml"} {
		if !strings.Contains(env, w) {
			t.Errorf("Env() = %s, want %s", env, w)
		}
	}
}

// The default build (AG_GGML_COOPMAT unset: auto) is the coopmat build
// where a Vulkan GPU here offers VK_KHR_cooperative_matrix, the plain build
// elsewhere (CI's lavapipe), as build.sh's own probe decides; an explicit
// 0 or 1 is obeyed either way, and a value other than auto, 0 or 1 is
// refused.
func TestCoopmatDefault(t *testing.T) {
	prefix := func(mode string) (string, error) {
		cmd := exec.Command("bash", "build.sh", "--print-prefix")
		cmd.Env = append(os.Environ(), "AG_GGML_COOPMAT="+mode)
		if mode == "" {
			cmd.Env = append(os.Environ(), "AG_GGML_COOPMAT=auto")
		}
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	plain, err := prefix("0")
	if err != nil {
		t.Fatal(err)
	}
	coop, err := prefix("1")
	if err != nil {
		t.Fatal(err)
	}
	auto, err := prefix("")
	if err != nil {
		t.Fatal(err)
	}
	if plain == coop || !strings.Contains(coop, "-coopmat-") || strings.Contains(plain, "-coopmat-") {
		t.Fatalf("prefixes: AG_GGML_COOPMAT=0 %s, =1 %s: want two, the second named coopmat", plain, coop)
	}
	// build.sh's own probe; CI's machine has lavapipe alone, so there auto
	// is plain.
	probe := exec.Command("bash", "build.sh", "--coopmat-probe")
	out, perr := probe.Output()
	want := plain
	if perr == nil {
		want = coop
	}
	t.Logf("probe: %q (%v)", strings.TrimSpace(string(out)), perr)
	if auto != want {
		t.Errorf("AG_GGML_COOPMAT=auto gives %s, want %s (the probe says %q, %v)", auto, want, out, perr)
	}
	if _, err := prefix("yes"); err == nil {
		t.Errorf("AG_GGML_COOPMAT=yes was accepted")
	}
}
