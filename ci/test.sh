#!/usr/bin/env bash
# The test command: set up, build, run every test (GoogleTest + RapidCheck) with CTest.
# GPU tests skip where there is no GPU; their reasons are printed after the run.
# KVERIFY_TEST_LEVEL=full raises the RapidCheck case count and adds the tests labelled slow
# (compile health: ptxas over every kernel specialization); the default level leaves them out
# and names them.
set -euo pipefail
cd "$(dirname "$0")/.."
ci/setup.sh --with-browser
preset=$(ci/build.sh | tail -n 1)
level=(-LE slow)
if [ "${KVERIFY_TEST_LEVEL:-fast}" = "full" ]; then export RC_PARAMS="max_success=1000"; level=(); fi
code=0
ctest --preset "$preset" "${level[@]}" || code=$?
log="build/$preset/Testing/run.log"  # the run's output, before `ctest -N` below rewrites LastTest.log
cp "build/$preset/Testing/Temporary/LastTest.log" "$log" 2>/dev/null || : > "$log"
if [ ${#level[@]} -gt 0 ]; then
  echo "Left out at KVERIFY_TEST_LEVEL=fast (run with KVERIFY_TEST_LEVEL=full):"
  ctest --preset "$preset" -N -L slow | { grep -E "Test +#" || echo "none in this build"; } | sed 's/^/  /'
fi
# Why tests skipped: the line after each GoogleTest "Skipped", and script tests' own lines.
why=$( { grep -A1 -E ": Skipped$" "$log" | grep -vE ": Skipped$|^--$"; grep -E "^\[  SKIPPED \] [^ ]+: |^SKIP: " "$log" || true; } )
if [ -n "$why" ]; then
  echo "Skipped tests and why (tests per reason):"
  echo "$why" | sort | uniq -c | sed 's/^/  /'
fi
# The Slurm test's account of itself: the kill, the requeue, the comparison, the timings.
slurm=$(awk '/Testing: SlurmArrayCampaign/{on=1} on{print} on&&/<end of output>/{exit}' "$log")
if [ -n "$slurm" ]; then
  echo "SlurmArrayCampaign:"
  echo "$slurm" | grep -E "^(single process|submitted|killed task|requeued|task [0-9]+/[0-9]+: kverify|timings|same|DIFFERENT|[0-9]+ cases on both sides|PASSED|FAILED|\[  SKIPPED)" | sed 's/^/  /' || true
fi
exit $code
