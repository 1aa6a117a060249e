package web_test

// The examples (examples/*, each a main package calling app.Run) in the
// page: each is built for the browser as `ag serve -app` builds it, served
// on its own server, trained through the page's form in the shared
// headless Chromium, and must learn there as it does natively.

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ag-go/ag/web"
)

// openApp builds examples/name for the browser, serves it and opens the
// page in a new tab, ready to train.
func openApp(t *testing.T, name string) *tab {
	t.Helper()
	browser(t)
	dir := filepath.Join(env.dir, "app-"+name)
	t0 := time.Now()
	if err := web.BuildApp("github.com/ag-go/ag/examples/"+name, dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("built examples/%s for the browser in %.1f s", name, time.Since(t0).Seconds())
	srv := httptest.NewServer(web.Handler(web.Options{WasmDir: dir}))
	t.Cleanup(srv.Close)
	tb := openTabAt(t, 1280, 900, "", srv.URL+"/")
	tb.wait(t, ready, 60*time.Second)
	got := eval[map[string]string](t, tb, `({app: document.body.dataset.app, title: document.querySelector("#setup-h").textContent,
		mlp: String(document.querySelectorAll("#f-width, #f-depth").length), out: String(document.querySelector("#app-out").hidden)})`)
	if got["app"] != name || !strings.HasPrefix(got["title"], name) || got["mlp"] != "0" || got["out"] != "false" {
		t.Fatalf("page of examples/%s: %v: want the app's name, no MLP fields, the metrics card shown", name, got)
	}
	checkAppLayout(t, tb)
	return tb
}

// checkAppLayout: the metrics and samples card sits above the profiles (it
// was placed last, below every profile), and the device select is wide
// enough for its longest option (an app's long hints clipped it to "CPU (G").
func checkAppLayout(t *testing.T, tb *tab) {
	t.Helper()
	got := eval[map[string]float64](t, tb, `(() => {
		const top = (s) => document.querySelector(s).getBoundingClientRect().top;
		const sel = document.querySelector("#f-device"), cs = getComputedStyle(sel);
		const ctx = document.createElement("canvas").getContext("2d");
		ctx.font = cs.font;
		const need = Math.max(...[...sel.options].map(o => ctx.measureText(o.text).width));
		return {out: top("#app-out"), bd: top(".breakdown"), need,
			have: sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 16};
	})()`)
	if got["out"] >= got["bd"] {
		t.Errorf("metrics card at y=%.0f, profiles at y=%.0f: want the metrics above the profiles", got["out"], got["bd"])
	}
	if got["have"] < got["need"] {
		t.Errorf("device select has %.0f px for its text, its longest option needs %.0f: clipped", got["have"], got["need"])
	}
}

// An app whose Trainer has no Params() (the README's app.Run snippet):
// the page says nothing of its parameter count, rather than "0 parameters".
func TestAppWithoutParams(t *testing.T) {
	browser(t)
	dir := filepath.Join(env.dir, "app-noparams")
	if err := web.BuildApp("./testdata/noparams", dir); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(web.Handler(web.Options{WasmDir: dir}))
	t.Cleanup(srv.Close)
	tb := openTabAt(t, 1280, 900, "", srv.URL+"/")
	tb.wait(t, ready, 60*time.Second)
	tb.do(t, chromedp.SetValue(chromedp.CSS("#f-device"), "cpu"), chromedp.SetValue(chromedp.CSS("#f-steps"), "5"), chromedp.Click(chromedp.CSS("#btn-train")))
	tb.wait(t, `document.body.dataset.trained`, 60*time.Second)
	if desc := eval[string](t, tb, `document.querySelector("#model-desc").textContent`); strings.Contains(desc, "parameters") {
		t.Errorf("model description %q: an app without Params() has no count to show", desc)
	}
	checkAppLayout(t, tb)
	tb.screenshot(t, "app-noparams.png")
	tb.noErrors(t)
}

// trainApp sets the form's parameters and steps, trains, and returns the
// metrics before and after and the loss curve's first and last values.
func trainApp(t *testing.T, tb *tab, device string, params map[string]string, steps int, timeout time.Duration) (before, after map[string]float64, first, last float64) {
	t.Helper()
	acts := []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.CSS("#f-device"), device)}
	for k, v := range params {
		acts = append(acts, chromedp.SetValue(chromedp.CSS("#p-"+k), v))
	}
	acts = append(acts, chromedp.SetValue(chromedp.CSS("#f-steps"), fmt.Sprint(steps)), chromedp.Click(chromedp.CSS("#btn-train")))
	tb.do(t, acts...)
	t0 := time.Now()
	tb.wait(t, `document.body.dataset.trained`, timeout)
	got := eval[map[string]string](t, tb, `({...document.querySelector("#loss-chart").dataset, m0: document.body.dataset.metrics0 || "",
		m: document.body.dataset.metrics || "", device: document.querySelector("#device-name").textContent,
		rows: String(document.querySelectorAll("#metrics tr[data-metric]").length)})`)
	fmt.Sscan(got["first"], &first)
	fmt.Sscan(got["last"], &last)
	if err := json.Unmarshal([]byte(got["m0"]), &before); err != nil {
		t.Fatalf("metrics before training %q: %v", got["m0"], err)
	}
	if err := json.Unmarshal([]byte(got["m"]), &after); err != nil {
		t.Fatalf("metrics after training %q: %v", got["m"], err)
	}
	t.Logf("trained %d steps in %.1f s on %s: loss %s -> %s; metrics %v -> %v", steps, time.Since(t0).Seconds(), got["device"], got["first"], got["last"], before, after)
	if got["points"] != fmt.Sprint(steps) {
		t.Errorf("loss curve has %s points, want %d", got["points"], steps)
	}
	if got["rows"] != fmt.Sprint(len(after)) {
		t.Errorf("metrics table has %s rows, want %d", got["rows"], len(after))
	}
	return before, after, first, last
}

// The spiral trains on the page's best device (WebGPU: SwiftShader here,
// about 0.1 s a step); the transformer and the DQN, whose steps are many
// small kernels or syncs, would take minutes on SwiftShader and train on
// the pure-Go backend compiled to wasm, in the same tab.

// The spiral classifier: accuracy from near chance to 0.9, the loss down
// three times, and the three execution modes profiled.
func TestExampleSpiral(t *testing.T) {
	tb := openApp(t, "spiral")
	before, after, first, last := trainApp(t, tb, "best", nil, 300, 90*time.Second)
	if !(before["test accuracy"] < 0.6 && after["test accuracy"] >= 0.9 && after["train accuracy"] >= 0.9) {
		t.Errorf("accuracy %v -> %v: want < 0.6 before, >= 0.9 after", before, after)
	}
	if !(last < first/3) {
		t.Errorf("loss %g -> %g: want it divided by 3 or more", first, last)
	}
	tb.do(t, chromedp.SetValue(chromedp.CSS("#f-psteps"), "2"), chromedp.Click(chromedp.CSS("#btn-profile")))
	tb.wait(t, `document.body.dataset.profiled`, 90*time.Second)
	checkBars(t, tb, []string{"eager", "lazy", "captured"})
	tb.screenshot(t, "example-spiral.png")
	// 20 more steps with the loss read every 10th (the spiral is an
	// app.UnreadStepper): 2 more points on the chart.
	was := eval[map[string]string](t, tb, `({total: document.body.dataset.trained, points: document.querySelector("#loss-chart").dataset.points})`)
	tb.do(t, chromedp.SetValue(chromedp.CSS("#f-steps"), "20"), chromedp.SetValue(chromedp.CSS("#f-every"), "10"), chromedp.Click(chromedp.CSS("#btn-train")))
	tb.wait(t, `document.body.dataset.trained !== "`+was["total"]+`"`, 60*time.Second)
	var points int
	fmt.Sscan(was["points"], &points)
	if n := eval[string](t, tb, `document.querySelector("#loss-chart").dataset.points`); n != fmt.Sprint(points+2) {
		t.Errorf("20 steps read every 10th after %d points: %s points on the chart, want %d", points, n, points+2)
	}
	tb.noErrors(t)
}

// The character-level transformer at test size: the held-out loss falls
// from ln(vocab) (3.9) below 2.9, and the sample continues the prompt.
func TestExampleCharGPT(t *testing.T) {
	tb := openApp(t, "chargpt")
	small := map[string]string{"layers": "1", "dim": "32", "heads": "2", "context": "16", "batch": "8"}
	before, after, first, last := trainApp(t, tb, "cpu", small, 120, 100*time.Second)
	if !(before["held-out loss"] > 3.6 && after["held-out loss"] < 2.9) {
		t.Errorf("held-out loss %v -> %v: want > 3.6 before, < 2.9 after", before["held-out loss"], after["held-out loss"])
	}
	if !(last < first-0.5) {
		t.Errorf("training loss %g -> %g: want it 0.5 lower or more", first, last)
	}
	sample := eval[string](t, tb, `document.querySelector("#sample").textContent`)
	if !strings.HasPrefix(sample, "The keeper") || len(sample) < 100 {
		t.Errorf("sample %q: want the prompt continued", sample)
	}
	// samples as it learns: 120 steps in 4 parts, a sample after each
	if n := eval[string](t, tb, `document.body.dataset.samples`); n != "4" {
		t.Errorf("%s samples shown during and after 120 steps, want 4", n)
	}
	tb.screenshot(t, "example-chargpt.png")
	tb.noErrors(t)
}

// The DQN agent: its greedy policy from falling at once (the untrained
// net, about 17 steps) to 100 steps or more, trained in the tab with its
// replay buffer on the page's device.
func TestExampleDQN(t *testing.T) {
	tb := openApp(t, "dqn")
	before, after, _, _ := trainApp(t, tb, "cpu", nil, 2500, 110*time.Second)
	if !(before["greedy episode length"] < 40 && after["greedy episode length"] >= 100) {
		t.Errorf("greedy episode length %v -> %v: want < 40 before, >= 100 after (random: 22)", before["greedy episode length"], after["greedy episode length"])
	}
	tb.screenshot(t, "example-dqn.png")
	tb.noErrors(t)
}
