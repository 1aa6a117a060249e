// Command noparams is an app whose Trainer has no Params() method, as the
// README's app.Run snippet leaves it: the page must not say "0 parameters"
// (web/examples_test.go).
package main

import (
	"github.com/ag-go/ag/app"
	"github.com/ag-go/ag/core"
)

// line fits y = w x by gradient descent written out by hand.
type line struct {
	w float32
}

func (l *line) Step() (float32, error) {
	// loss = (w - 2)^2 for x = 1, y = 2
	d := l.w - 2
	l.w -= 0.2 * d
	return d * d, nil
}

func main() {
	app.Run(app.Spec{Name: "noparams", Describe: "a line fitted without Params()", Params: []app.Param{{Name: "w0", Default: 0, Min: -10, Max: 10}},
		Build: func(dev *core.Device, cfg app.Config) (app.Trainer, error) { return &line{w: cfg.Float32("w0")}, nil }})
}
