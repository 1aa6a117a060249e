//go:build tools

// Package deps pins the project's third-party modules in go.mod before the
// packages that use them exist, so parallel work never races on go.mod.
package deps

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/cogentcore/webgpu/wgpu"
)
