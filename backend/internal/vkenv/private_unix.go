//go:build unix

package vkenv

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// privateDir returns $TMPDIR/ag-runtime-<uid>, creating it if missing, when
// it is a directory of this user's that no one else may enter.
func privateDir() (string, error) {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("ag-runtime-%d", os.Getuid()))
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	fi, err := os.Lstat(dir) // not Stat: a symlink planted by someone else is refused
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ok || int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("vkenv: %s is not a private directory of uid %d", dir, os.Getuid())
	}
	return dir, nil
}
