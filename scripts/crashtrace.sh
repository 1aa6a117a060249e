#!/usr/bin/env bash
# crashtrace.sh runs a test binary (go test -exec scripts/crashtrace.sh) with
# core dumps on, and when it dies of a signal prints every thread's stack
# from the core with gdb. A crash on a thread that C created (a Vulkan
# driver's worker, ggml's) kills the process with no Go trace at all: Go's
# handler does not report signals on threads it does not run, so the core
# is the only witness. Nothing changes for a binary that exits normally.
ulimit -c unlimited 2>/dev/null || true
# In the foreground: a background job of a non-interactive shell ignores
# SIGINT and SIGQUIT, so Ctrl-C and go test's SIGQUIT on a hung binary
# would not reach it.
"$@"
rc=$?
if [ "$rc" -gt 128 ]; then
  echo "crashtrace: $(basename "$1") in $PWD died of signal $((rc - 128))" >&2
  # core, or core.PID with kernel.core_uses_pid: the newest
  core=$(ls -t core core.[0-9]* 2>/dev/null | head -1)
  if [ -z "$core" ] || [ ! -f "$core" ]; then
    echo "crashtrace: no core file here (core_pattern: $(cat /proc/sys/kernel/core_pattern 2>/dev/null); ulimit -c: $(ulimit -c))" >&2
  elif ! command -v gdb >/dev/null; then
    echo "crashtrace: a core file but no gdb to read it (apt-get install gdb)" >&2
  else
    gdb -q -batch -ex 'echo == the crashing thread:\n' -ex 'bt 40' -ex 'echo == every thread:\n' -ex 'info threads' -ex 'thread apply all bt 12' "$1" "$core" 2>&1 | grep -v -e '^\[New LWP' -e 'auto-load' | head -600 >&2
  fi
  rm -f "$core"
fi
exit $rc
