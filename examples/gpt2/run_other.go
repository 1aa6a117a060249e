//go:build !js

package main

import (
	"io"

	"github.com/ag-go/ag/app"
)

// run is the command line: app.RunArgs of Spec.
func run(args []string, out io.Writer) error { return app.RunArgs(Spec, args, out) }
