package backend

import (
	"strings"
	"testing"
)

// A user's module that opens a backend it never imported is told the
// import that registers it (issue 38: "no such driver (registered: [cpu])"
// said nothing of backend/all), and for ggml the build tag too.
func TestRegisterHint(t *testing.T) {
	for _, c := range []struct {
		name string
		want []string
	}{
		{"webgpu", []string{`import _ "github.com/ag-go/ag/backend/all"`, "github.com/ag-go/ag/backend/webgpu"}},
		{"ggml-vulkan", []string{"backend/all", "github.com/ag-go/ag/backend/native", "-tags ggml", "cmd/ag ggml"}},
		{"ggml-cpu", []string{"github.com/ag-go/ag/backend/native", "-tags ggml"}},
	} {
		h := registerHint(c.name)
		for _, w := range c.want {
			if !strings.Contains(h, w) {
				t.Errorf("registerHint(%q) = %q, want it to say %q", c.name, h, w)
			}
		}
	}
	if h := registerHint("tpu"); h != "" {
		t.Errorf("registerHint(tpu) = %q, want nothing for a name ag has no driver of", h)
	}
	// The error itself carries the hint.
	_, err := Open("no-such-backend")
	if err == nil || !strings.Contains(err.Error(), "no such driver") {
		t.Errorf("Open(no-such-backend) = %v, want ErrNoDriver", err)
	}
}
