#!/bin/bash
# The launch-bound A/B of the GPU host (benchmarks/README.md): the decode plan (stacks/validation/decode.toml)
# between the host's python3 and itself, once with CUDA_LAUNCH_BLOCKING=1 in the candidate's environment
# (stacks/h200-blocking.toml) and once with identical legs.
#
#   bash benchmarks/gpu-host/ab-decode.sh OUT [blocking|identical ...]
#
# Runs from a source copy of stackctl (PYTHONPATH); the host's python3 has what stackctl needs. Writes per A/B
# the record, its picture and the markdown summary under OUT, and every progress line to OUT/log.txt.
set -u
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
shift
export PYTHONPATH=$(pwd) PYTHONUNBUFFERED=1
cd benchmarks/gpu-host
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'transformers', transformers.__version__)"
} >> "$OUT/log.txt" 2>&1
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(blocking identical)
for name in "${names[@]}"; do
  case $name in
    blocking) candidate=h200-blocking ;;
    identical) candidate=h200 ;;
    *) echo "unknown A/B $name" >&2; exit 2 ;;
  esac
  start=$(date +%s)
  python3 -m stackctl ab stacks/h200.toml "stacks/$candidate.toml" --plan stacks/validation/decode.toml \
    --python python3 --python python3 --record "$OUT/ab-decode-$name.json" --markdown \
    > "$OUT/ab-decode-$name.md" 2>> "$OUT/log.txt"
  echo "exit $? in $(( $(date +%s) - start )) s" >> "$OUT/ab-decode-$name.md"
done
