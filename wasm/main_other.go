//go:build !js

package main

import (
	"fmt"
	"os"
)

// main exists so that `go build ./...` and `go vet ./...` work natively.
func main() {
	fmt.Fprintln(os.Stderr, "ag/wasm runs in a browser: build it with `make wasm` (GOOS=js GOARCH=wasm) and open `ag serve`")
	os.Exit(2)
}
