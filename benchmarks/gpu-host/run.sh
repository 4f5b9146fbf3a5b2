#!/bin/bash
# The GPU host's runs (benchmarks/README.md): the gate's device phase for the host's stack (passing, a wrong pin,
# more devices than there are and a probe that raises), then `ab --python` between two environments that differ
# only in abkernel (equal: neutral; the candidate's 1.0.1 sleeps before each step: regressed).
#
#   bash run.sh BUNDLE OUT
#
# BUNDLE holds src/ (stackctl, gates/, Dockerfile.in), whl/ (what the host lacks: typer), kernel/ (abkernel's
# two wheels) and gpu/ (this directory's stacks/). The host has no network: nothing is fetched.
set -u
B=$(cd "$1" && pwd)
OUT=$2
mkdir -p "$OUT"
LOG=$OUT/log.txt
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$B"/whl/*.whl || exit 1
export PYTHONPATH=$B/src:/tmp/site PYTHONUNBUFFERED=1
TORCH_SITE=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -m pip list 2>/dev/null | grep -i -E "^(torch|triton|numpy|scipy|rich|pytest) "
} > "$LOG" 2>&1

# Three environments of the host's python3: each a venv that reads the host's packages (torch) through a .pth
# and abkernel from its own --target directory. A and A2 hold 1.0.0, B 1.0.1.
for env in A:1.0.0 A2:1.0.0 B:1.0.1; do
  name=${env%%:*} version=${env##*:}
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pkg$name "$B"/kernel/abkernel-$version-*.whl
  python3 -m venv --without-pip --system-site-packages /tmp/env$name
  site=$(/tmp/env$name/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "import site; site.addsitedir('$TORCH_SITE')" > "$site/host-torch.pth"
  echo "/tmp/pkg$name" > "$site/abkernel.pth"
  /tmp/env$name/bin/python -c "import torch, abkernel; print('env$name', torch.__version__, 'abkernel', abkernel.__version__, 'cuda', torch.cuda.is_available())" >> "$LOG" 2>&1
done

cd "$B/gpu"
S="python3 -m stackctl"
{
  for p in h200 h200-wrong-pin h200-two-gpus; do
    echo "== stackctl gate stacks/$p.toml --python python3 --phase device"
    start=$(date +%s.%N)
    $S gate stacks/$p.toml --python python3 --phase device
    echo "exit $? in $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
  done
  echo "== stackctl gate stacks/h200.toml --python python3 (stack and app phases)"
  $S gate stacks/h200.toml --python python3
  echo "exit $?"
} > "$OUT/gate.txt" 2>&1

run_ab() {  # NAME CANDIDATE-PROFILE CANDIDATE-ENV
  start=$(date +%s)
  $S ab stacks/h200-kernel-a.toml "stacks/$2.toml" --python /tmp/envA/bin/python --python "/tmp/env$3/bin/python" \
    --record "$OUT/ab-$1.json" --markdown > "$OUT/ab-$1.md" 2> "$OUT/ab-$1.log"
  echo "exit $? in $(( $(date +%s) - start )) s" >> "$OUT/ab-$1.md"
}
run_ab neutral h200-kernel-a A2
run_ab regressed h200-kernel-b B
