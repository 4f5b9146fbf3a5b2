#!/bin/bash
# `ab --cluster` on the GPU host (benchmarks/README.md): a one-node Ray cluster on the host's card(s), started here
# on loopback, and the kernel A/B of run.sh (abkernel 1.0.0 against itself: neutral; against 1.0.1, which sleeps
# before each step: regressed) run on it, each trial one task holding a card for its whole schedule; then the same
# two A/Bs without --cluster, in this process, for the verdicts and the time side by side.
#
#   bash benchmarks/gpu-host/cluster.sh BUNDLE OUT
#
# BUNDLE holds ray.tar.xz (Ray for the host's Python, unpacked: the host has no network), whl/ (Ray's needs the
# host lacks) and kernel/ (abkernel's two wheels). stackctl runs from this checkout (PYTHONPATH).
set -u
B=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
LOG=$OUT/log.txt
mkdir -p /tmp/ray-site
tar -C /tmp/ray-site -xJf "$B/ray.tar.xz" || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/ray-site "$B"/whl/*.whl || exit 1
# one machine, on loopback: Ray takes 127.0.0.1 as the node's address only when told it is a single-host cluster
export PYTHONPATH=$REPO:/tmp/ray-site PYTHONUNBUFFERED=1 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 PATH=/tmp/ray-site/bin:$PATH
TORCH_SITE=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
{
  date -u
  nvidia-smi --query-gpu=name,uuid,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, ray, torch; print(sys.version.split()[0], 'ray', ray.__version__, 'torch', torch.__version__)"
} > "$LOG" 2>&1

for env in A:1.0.0 A2:1.0.0 B:1.0.1; do
  name=${env%%:*} version=${env##*:}
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/pkg$name "$B"/kernel/abkernel-$version-*.whl
  python3 -m venv --without-pip --system-site-packages /tmp/env$name
  site=$(/tmp/env$name/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  echo "import site; site.addsitedir('$TORCH_SITE')" > "$site/host-torch.pth"
  echo "/tmp/pkg$name" > "$site/abkernel.pth"
done

GPUS=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | wc -l)
python3 -m ray.scripts.scripts start --head --node-ip-address=127.0.0.1 --port=6379 --num-gpus="$GPUS" \
  --num-cpus=4 --include-dashboard=false --disable-usage-stats >> "$LOG" 2>&1 || { cat "$LOG"; exit 1; }

cd "$HERE"
run_ab() {  # NAME CANDIDATE-PROFILE CANDIDATE-ENV [--cluster ADDRESS]
  name=$1 profile=$2 env=$3
  shift 3
  start=$(date +%s.%N)
  python3 -m stackctl ab stacks/h200-kernel-a.toml "stacks/$profile.toml" --python /tmp/envA/bin/python \
    --python "/tmp/env$env/bin/python" --record "$OUT/ab-$name.json" --markdown "$@" \
    > "$OUT/ab-$name.md" 2> "$OUT/ab-$name.log"
  echo "exit $? in $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s" >> "$OUT/ab-$name.md"
}
run_ab cluster-neutral h200-kernel-a A2 --cluster 127.0.0.1:6379
run_ab cluster-regressed h200-kernel-b B --cluster 127.0.0.1:6379
run_ab local-neutral h200-kernel-a A2
run_ab local-regressed h200-kernel-b B
python3 -m ray.scripts.scripts stop --force >> "$LOG" 2>&1
tail -n 2 "$OUT"/ab-*.md >> "$LOG"
