#!/usr/bin/env bash
# What a harness exit code means, in one line on stderr (make hides it behind its own exit 2).
# The meanings are harness/commands/common.py's EXIT_MEANINGS, word for word (a test holds them together).
# Usage: exit-meaning.sh <what> <code>
what=$1 code=$2
case $code in
  0) exit 0 ;;
  1) meaning="the verdict does not match the claim (not reproduced, refuted or inconclusive)" ;;
  2) meaning="bad input, or the run could not be carried out (no engine, a broker that never started)" ;;
  3) meaning="a bug in the harness (its traceback is above)" ;;
  130) meaning="interrupted; faults healed and the cluster removed" ;;
  *) meaning="unexpected" ;;
esac
echo "$what exited $code: $meaning (make itself exits 2 for any failure)" >&2
