# ag - the two commands a new user runs:
#   make demo   train the seeds' MLP on the best device here and print the loss and step times
#   make test   install what the tests need when missing, build ggml, run every test
#
# ggml (CPU + Vulkan) is built outside the clone and cached by version
# (backend/native/ggml/build.sh); when it has been built, every target links
# it (-tags ggml), otherwise the pure-Go and WebGPU backends are used.

SHELL := /bin/bash
GO        ?= go
GGML_BUILD := backend/native/ggml/build.sh
GGML_PREFIX := $(shell bash $(GGML_BUILD) --print-prefix 2>/dev/null)
HAVE_GGML := $(wildcard $(GGML_PREFIX)/.built)
ifneq ($(HAVE_GGML),)
  TAGS := -tags ggml
  export CGO_CFLAGS := -I$(GGML_PREFIX)/include
  export CGO_LDFLAGS := -L$(GGML_PREFIX)/lib
endif
# Tests of the ggml Vulkan device run on lavapipe, which ggml skips unless asked.
TEST_ENV := GGML_VK_VISIBLE_DEVICES=0

# `make test` requires every device it installed (deps: lavapipe for webgpu,
# Chromium; vulkan: ggml): a test that would skip for lack of one fails
# instead (backend/backendtest/testenv), so a run with a device missing is never green.
comma := ,
REQUIRED_DEVICES := cpu,webgpu,chromium$(if $(HAVE_GGML),$(comma)ggml-cpu$(comma)ggml-vulkan)
ifeq ($(REQUIRE_INSTALLED),1)
  export AG_REQUIRE_DEVICES := $(REQUIRED_DEVICES)
  # Node (deps) runs WebAssembly SIMD: wasm-test fails without the SIMD kernel.
  export AG_REQUIRE_WASM_SIMD := 1
endif

.PHONY: demo test test-devices deps vulkan vet unit adversarial devices-test wasm-check wasm-test wasm serve bench bench-peers bench-browser build clean-cache

demo:
	$(GO) run $(TAGS) ./cmd/ag demo -profile

# The browser build: ag.wasm and wasm_exec.js into web/dist (embedded by `ag serve`).
wasm:
	bash web/build.sh

# `make serve APP=./examples/spiral` serves a model of your own instead of
# the MLP: any main package whose main calls app.Run (ag serve -app).
serve:
ifeq ($(APP),)
	bash web/build.sh
	$(GO) run $(TAGS) ./cmd/ag serve
else
	$(GO) run $(TAGS) ./cmd/ag serve -app $(APP)
endif

build:
	$(GO) build $(TAGS) ./...

deps:
	bash scripts/deps.sh

# Builds ggml once per version (installing its build tools when missing);
# later runs print "up to date".
vulkan:
	bash scripts/deps.sh ggml
	bash $(GGML_BUILD)

# `make test` re-invokes make after the ggml build so TAGS/CGO flags see it.
# go test shows nothing of a passing package, so the skips that remain
# (opt-in diagnostics, capabilities a backend lacks) are collected in a file
# (AG_SKIP_LOG) and listed at the end, pass or fail; so is the crash site of
# a test binary that died of a signal (AG_CRASH_LOG), the last thing printed
# before the verdict because a CI log may keep only its beginning and end.
test: deps vulkan
	@log=$$(mktemp); crash=$$(mktemp); trap 'rm -f "$$log" "$$crash"' EXIT; \
	AG_SKIP_LOG="$$log" AG_CRASH_LOG="$$crash" $(MAKE) --no-print-directory REQUIRE_INSTALLED=1 test-devices vet unit adversarial devices-test wasm-check wasm-test; rc=$$?; \
	echo "== skipped ($$(sort -u "$$log" | wc -l), see backend/backendtest/testenv):"; sort -u "$$log"; \
	if [ -s "$$crash" ]; then echo "== crashed test binaries (scripts/crashtrace.sh; their full stacks are above):"; cat "$$crash"; fi; \
	[ $$rc = 0 ] && echo "== make test: passed; every required device ran" || echo "== make test: FAILED"; \
	exit $$rc

# One line on what the tests run on, before they run.
test-devices:
	@echo "== devices required (AG_REQUIRE_DEVICES): $(or $(AG_REQUIRE_DEVICES),none); nn, buffer, data, models and examples also run on: $(DEVICES)"

vet:
	$(GO) vet $(TAGS) ./...
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt: files above need formatting"; exit 1; }

# CRASH runs each test binary through scripts/crashtrace.sh: a crash on a
# thread that C made (lavapipe's workers, ggml's) leaves no Go trace, so the
# wrapper prints every thread's stack from the core; the binaries keep their
# symbols for it (go test strips them otherwise).
CRASH := -exec $(CURDIR)/scripts/crashtrace.sh -ldflags='-s=false -w=false'

# -timeout is a hang guard, not a speed check: a package's binary may take
# 10x its quiet time on a loaded 2-core machine (ggml-vulkan's conformance on
# lavapipe took over 30 min with the machine ~8x oversubscribed), and CI has
# 90 min for the whole cold run.
unit:
	$(TEST_ENV) $(GO) test $(TAGS) $(CRASH) -count=1 -timeout 60m -skip '^TestAdversarial$$' ./...

# The adversarial suite (internal/adversary): every bad input on every
# backend, one summary line per backend; the defects it finds fail it.
adversarial:
	set -o pipefail; $(TEST_ENV) $(GO) test $(TAGS) -count=1 -timeout 60m -v -run '^TestAdversarial$$' ./internal/adversary \
	  | grep -E '^(adversarial:|[[:space:]]+run_test|--- (FAIL|SKIP)|FAIL|ok|panic)'

# The device-independent tests (nn, dp, buffer, data, models, the examples) again on every other backend
# that runs here: WebGPU on lavapipe, and ggml's CPU and Vulkan devices.
DEVICES := webgpu $(if $(HAVE_GGML),ggml-cpu ggml-vulkan)
devices-test:
	set -e; for d in $(DEVICES); do echo "== nn, dp, buffer, data, models, examples on $$d"; \
	  AG_TEST_DEVICE=$$d $(TEST_ENV) $(GO) test $(TAGS) $(CRASH) -count=1 -timeout 60m ./nn/ ./dp/ ./buffer/ ./data/ ./models/ ./examples/...; done

# The packages that run in the browser must build for GOOS=js.
wasm-check:
	GOOS=js GOARCH=wasm $(GO) build ./core/ ./nn/ ./backend/... ./buffer/ ./data/ ./profile/ ./app/ ./examples/... ./metrics/ ./dp/
	GOOS=js GOARCH=wasm $(GO) vet ./core/ ./nn/ ./backend/cpu/ ./profile/

# The CPU backend's, nn's, the page's API's (package app's browser runner,
# the page's MLP in examples/mlp, internal/browser) tests compiled to wasm
# and run in Node (Go's go_js_wasm_exec), as the page runs them: the wasm
# SIMD matmul kernel checked against the Go kernel, the layers and
# optimizers on the wasm build, the API the page calls (~45 s). Node has no
# WebGPU: those tests use the cpu device.
# core's own tests are not run here: some allocate more than wasm32's 4 GiB,
# and TestProfileCoversStep finds 77-94% of a step attributed under wasm,
# below its 95% (not yet explained).
wasm-test:
	GOOS=js GOARCH=wasm $(GO) test -count=1 -timeout 60m -exec="$$($(GO) env GOROOT)/lib/wasm/go_js_wasm_exec" ./backend/cpu/ ./nn/ ./app/ ./examples/mlp/ ./internal/browser/...

bench:
	$(GO) run $(TAGS) ./cmd/ag bench -json bench.json

# ag next to PyTorch (Debian python3-torch) on this CPU, side by side.
bench-peers:
	bash bench/side_by_side.sh 3 cpu

# ag next to tfjs (webgpu, wasm, cpu) in the same headless Chromium (npm install on first use).
bench-browser:
	$(GO) run ./bench/browser -width 256 -depth 4 -batch 64 -steps 20 -json bench/browser/out/run.json

clean-cache:
	rm -rf $${AG_CACHE:-$$HOME/.cache/ag}
