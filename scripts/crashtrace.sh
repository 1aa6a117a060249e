#!/usr/bin/env bash
# crashtrace.sh runs a test binary (go test -exec scripts/crashtrace.sh) with
# core dumps on, and when it dies of a signal prints the stacks from the core
# with gdb. A crash on a thread that C created (a Vulkan driver's worker,
# ggml's) kills the process with no Go trace at all: Go's handler does not
# report signals on threads it does not run, so the core is the only
# witness. Nothing changes for a binary that exits normally.
#
# What it prints, shortest first, because a CI log may keep only a part:
# the crash site (the crashing thread's frames below the signal), one line
# per thread (its innermost frame and its innermost frame in ag, ggml or
# the Vulkan driver), then the full stacks, which also go to a file. With
# AG_CRASH_LOG set the crash site is appended there too, for make test to
# repeat at the end of its output.
ulimit -c unlimited 2>/dev/null || true
# In the foreground: a background job of a non-interactive shell ignores
# SIGINT and SIGQUIT, so Ctrl-C and go test's SIGQUIT on a hung binary
# would not reach it.
"$@"
rc=$?
[ "$rc" -gt 128 ] || exit $rc

say() { echo "$*" >&2; [ -n "${AG_CRASH_LOG:-}" ] && echo "$*" >>"$AG_CRASH_LOG"; }
say "crashtrace: $(basename "$1") in $PWD died of signal $((rc - 128))"
# core, or core.PID with kernel.core_uses_pid: the newest
core=$(ls -t core core.[0-9]* 2>/dev/null | head -1)
if [ -z "$core" ] || [ ! -f "$core" ]; then
  say "crashtrace: no core file here (core_pattern: $(cat /proc/sys/kernel/core_pattern 2>/dev/null); ulimit -c: $(ulimit -c))"
  exit $rc
fi
if ! command -v gdb >/dev/null; then
  say "crashtrace: a core file but no gdb to read it (apt-get install gdb)"
  rm -f "$core"
  exit $rc
fi
full=$(mktemp "${TMPDIR:-/tmp}/crashtrace.XXXXXX")
# -nx and no auto-load: Go's runtime-gdb.py cannot walk goroutines in a
# core, and the refusal to load it is a screenful of text.
gdb -q -batch -nx -iex 'set auto-load off' -iex 'set print frame-arguments none' \
  -ex 'echo == the crashing thread:\n' -ex 'bt 60' -ex 'echo == registers:\n' -ex 'info registers rip rsp rax rdi rsi' \
  -ex 'echo == every thread:\n' -ex 'thread apply all bt 30' \
  -ex 'echo == the signal:\n' -ex 'thread 1' -ex 'frame function runtime.sigtrampgo' -ex 'print/x info.siginfoFields' \
  -ex 'echo == the libraries (to resolve a stripped driver frame later):\n' -ex 'info sharedlibrary' \
  "$1" "$core" >"$full" 2>&1
rm -f "$core"
# The crash site: the frames after "<signal handler called>" (before it are
# Go's handler re-raising the signal), without addresses and arguments.
site=$(awk '/^== the crashing thread:/{on=1; next} /^== /{on=0} on && seen && /^#/{print} on && /<signal handler called>/{seen=1}' "$full" |
  sed -E 's/^(#[0-9]+) +0x[0-9a-f]+ in /\1 /' | head -25)
if [ -z "$site" ]; then # no signal frame: the crashing thread's stack as it is
  site=$(awk '/^== the crashing thread:/{on=1; next} /^== /{on=0} on && /^#/' "$full" | sed -E 's/^(#[0-9]+) +0x[0-9a-f]+ in /\1 /' | head -25)
fi
sig=$(awk '/^== the signal:/{on=1} on && /si_signo/' "$full" | sed -E 's/^\$[0-9]+ = //')
say "crashtrace: the crash site (signal ${sig:-not found}):"
while IFS= read -r l; do say "  $l"; done <<<"$site"
# One line a thread: its innermost frame and its innermost frame in ag,
# ggml or the Vulkan driver (what it was doing for us).
echo "crashtrace: every thread (innermost frame | innermost ag/ggml/vulkan frame):" >&2
awk '/^Thread [0-9]+ /{if (t) print t " | " (ours ? ours : "-"); t=$1 " " $2; first=""; ours=""; next}
     /^#[0-9]+ / && t {f=$0; sub(/^#[0-9]+ +(0x[0-9a-f]+ in )?/, "", f); sub(/ \(.*/, "", f);
       if (first == "") { first = f; t = t ": " f }
       if (ours == "" && f ~ /^(ag_|ggml_|lvp_|lp_|vk|llvmpipe|_cgo|native\.|core\.|nn\.)/) ours = f}
     END {if (t) print t " | " (ours ? ours : "-")}' "$full" | head -60 >&2
echo "crashtrace: the full stacks are in $full; the first 400 lines:" >&2
grep -v -e '^\[New LWP' -e 'in core file too small' "$full" | head -400 >&2
exit $rc
