package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.json")
	if err := os.WriteFile(kept, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "new.json")
	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"", true},
		{kept, true},
		{fresh, true},
		{dir, false},
		{filepath.Join(dir, "no", "x.json"), false},
	} {
		err := Check(tc.path)
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok %v", tc.path, err, tc.ok)
		}
	}
	if !errors.Is(Check(dir), ErrFolder) {
		t.Errorf("Check(folder) = %v, want ErrFolder", Check(dir))
	}
	// the existing file untouched, the new one not left behind
	if b, _ := os.ReadFile(kept); string(b) != "old" {
		t.Errorf("Check changed an existing file: %q", b)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("Check left %s behind (%v)", fresh, err)
	}
}
