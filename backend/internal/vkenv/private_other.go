//go:build !unix

package vkenv

import "errors"

// privateDir: XDG_RUNTIME_DIR is a Unix convention; elsewhere leave it be.
func privateDir() (string, error) {
	return "", errors.New("vkenv: no XDG runtime directory on this system")
}
