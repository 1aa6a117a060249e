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
