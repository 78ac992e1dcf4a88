#!/usr/bin/env bash
# The cuda flavour's compiler launcher (CMakeLists.txt): runs one nvcc command (through ccache when that is the
# next word) and keeps ptxas's resource-usage report (--resource-usage) beside the object, as <object>.usage, for
# scripts/ptxas_check.py, so that the check reads the build's own compile instead of compiling every kernel's
# device code again (453 s of the test command on this project's 2-core machine). Everything else nvcc prints
# goes to stderr as usual. ccache replays a cached compile's report, so a cache hit writes the same file.
set -uo pipefail
out=""
prev=""
for a in "$@"; do
  if [ "$prev" = "-o" ]; then out=$a; fi
  prev=$a
done
if [ -z "$out" ]; then
  exec "$@"
fi
"$@" 2>"$out.usage.tmp"
rc=$?
grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' "$out.usage.tmp" >&2
if [ $rc -eq 0 ]; then
  mv -f "$out.usage.tmp" "$out.usage"
else
  rm -f "$out.usage.tmp" "$out.usage"
fi
exit $rc
