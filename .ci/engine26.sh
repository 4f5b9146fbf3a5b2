#!/usr/bin/env bash
# Start the BuildKit engines the tests build on besides Debian 12's 20.10: Docker 26.1 with buildx 0.13 (what
# Debian 13 ships, and what users have run since 2024), once with the overlay2 store and once with the
# containerd image store, each with its own data-root, exec-root, socket, pid file and bridge; and the buildx
# client plugin for this machine's docker CLI.
#
#   sudo bash .ci/engine26.sh     # then: DOCKER_HOST=unix:///run/stackctl-d26.sock  (overlay2)
#                                 #       DOCKER_HOST=unix:///run/stackctl-d26c.sock (containerd store)
#
# On Debian 13 the packages are installed here and dockerd runs as it is. On Debian 12 they come from a Debian
# 13 root made by debootstrap (cached under /var/cache/stackctl) and dockerd runs chrooted into it: the root
# bind-mounted on itself (so mount points resolve inside it), /proc, /dev and /dev/pts bound, /sys bound
# recursively (cgroups live below it), and a directory of /run shared so that the socket is reachable from
# here. Each engine has a bridge of its own: `--bridge=none` would delete docker0, which the host's engine
# owns; `--iptables=false --ip-masq=false` keeps it away from that engine's rules (the builds are offline).
# Idempotent: a second run only checks. Runs as root; .ci/services.sh calls it after the registry and base
# image are up.
#
# Optional overrides:
#   STACKCTL_DEBIAN_MIRROR  mirror URL for debootstrap (default: the first of the apt sources)
set -euo pipefail

CACHE_DIR=/var/cache/stackctl
ROOT=$CACHE_DIR/trixie-root
SHARED=/run/stackctl-d26     # bound into the root at the same path: the sockets live here
REGISTRY_ADDR=127.0.0.1:5000
BASE_IMAGE=stackctl-base:bookworm
LOG_DIR=/var/log
PACKAGES=(docker.io docker-cli docker-buildx)

log() { printf '[engine26] %s\n' "$*"; }
die() {
    printf '[engine26] ERROR: %s\n' "$1" >&2
    [ $# -ge 2 ] && [ -f "$2" ] && tail -n 40 "$2" >&2
    exit 1
}
[ "$(id -u)" -eq 0 ] || die "must run as root"
export DEBIAN_FRONTEND=noninteractive

. /etc/os-release
if [ "${VERSION_CODENAME:-}" = trixie ] || [ "${VERSION_ID:-0}" -ge 13 ] 2>/dev/null; then
    NATIVE=1
else
    NATIVE=0
fi

# --------------------------------------------------------------------------
# The packages: here on Debian 13, in a Debian 13 root elsewhere
# --------------------------------------------------------------------------
if [ $NATIVE = 1 ]; then
    missing=()
    for pkg in "${PACKAGES[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$pkg")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "installing: ${missing[*]}"
        apt-get install -y "${missing[@]}" >>$LOG_DIR/stackctl-apt.log 2>&1 || die "apt-get install failed" $LOG_DIR/stackctl-apt.log
    fi
    IN=()
else
    if [ ! -x "$ROOT/usr/sbin/dockerd" ] || [ ! -x "$ROOT/usr/libexec/docker/cli-plugins/docker-buildx" ]; then
        command -v debootstrap >/dev/null || die "debootstrap is not installed"
        mirror=${STACKCTL_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p; s/^deb  *\(\[[^]]*\] *\)\?\(https\?:[^ ]*\) .*/\2/p' \
            /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -v security | head -n 1 || true)}
        [ -n "$mirror" ] || die "no Debian mirror found in the apt sources; set STACKCTL_DEBIAN_MIRROR"
        log "debootstrap trixie with ${PACKAGES[*]} from $mirror (log: $LOG_DIR/stackctl-debootstrap-trixie.log)"
        rm -rf "$ROOT.tmp"
        debootstrap --variant=minbase --include="$(IFS=,; echo "${PACKAGES[*]}"),ca-certificates,iproute2" \
            trixie "$ROOT.tmp" "$mirror" >$LOG_DIR/stackctl-debootstrap-trixie.log 2>&1 \
            || { rm -rf "$ROOT.tmp"; die "debootstrap of trixie failed" $LOG_DIR/stackctl-debootstrap-trixie.log; }
        rm -rf "$ROOT.tmp"/var/cache/apt/archives/*.deb "$ROOT.tmp"/var/lib/apt/lists/*
        rm -rf "$ROOT" && mv "$ROOT.tmp" "$ROOT"
    fi
    mounted() { mountpoint -q "$1"; }
    mounted "$ROOT" || mount --bind "$ROOT" "$ROOT"
    mounted "$ROOT/proc" || mount -t proc proc "$ROOT/proc"
    mounted "$ROOT/dev" || mount --bind /dev "$ROOT/dev"
    mounted "$ROOT/dev/pts" || mount --bind /dev/pts "$ROOT/dev/pts"
    mounted "$ROOT/sys" || mount --rbind /sys "$ROOT/sys"
    mkdir -p "$SHARED" "$ROOT$SHARED"
    mounted "$ROOT$SHARED" || mount --bind "$SHARED" "$ROOT$SHARED"
    cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
    IN=(chroot "$ROOT")
fi
mkdir -p "$SHARED"

# The buildx plugin for this machine's docker CLI: Debian 13's binary runs on Debian 12 as it is, and drives
# 20.10's embedded BuildKit as well as 26's.
PLUGIN_DIR=/usr/libexec/docker/cli-plugins
if [ $NATIVE = 0 ]; then
    mkdir -p "$PLUGIN_DIR"
    if ! cmp -s "$ROOT$PLUGIN_DIR/docker-buildx" "$PLUGIN_DIR/docker-buildx"; then
        install -m 0755 "$ROOT$PLUGIN_DIR/docker-buildx" "$PLUGIN_DIR/docker-buildx.tmp"
        mv "$PLUGIN_DIR/docker-buildx.tmp" "$PLUGIN_DIR/docker-buildx"
    fi
fi
for cli in /usr/local/lib/docker/cli-plugins; do  # a docker CLI installed by hand looks here first
    if [ -d "$(dirname "$cli")" ] && [ ! -e "$cli/docker-buildx" ]; then
        mkdir -p "$cli" && ln -s "$PLUGIN_DIR/docker-buildx" "$cli/docker-buildx"
    fi
done

# --------------------------------------------------------------------------
# The engines
# --------------------------------------------------------------------------
# NAME BRIDGE CIDR CONTAINERD-STORE
ENGINES=(
    "d26 stk26 192.168.214.1/24 false"
    "d26c stk26c 192.168.215.1/24 true"
)
# STACKCTL_BENCH_ENGINE=1: a third, containerd-store engine for the benchmarks alone (benchmarks/README.md),
# whose build cache they may empty without touching a test's
if [ -n "${STACKCTL_BENCH_ENGINE:-}" ]; then
    ENGINES+=("dbench stkbench 192.168.216.1/24 true")
fi

start_engine() {
    local name=$1 bridge=$2 cidr=$3 snapshotter=$4
    local sock=$SHARED/$name.sock link=/run/stackctl-$name.sock log=$LOG_DIR/stackctl-$name.log
    local data=/var/lib/stackctl-$name exec=/run/stackctl-$name-exec pidfile=/run/stackctl-$name.pid
    answers() { timeout 10 env DOCKER_HOST="unix://$link" DOCKER_API_VERSION= docker version >/dev/null 2>&1; }
    ln -sfn "$sock" "$link"
    if answers; then
        log "$name: already running on $link"
        return
    fi
    if ! ip link show "$bridge" >/dev/null 2>&1; then
        ip link add "$bridge" type bridge || die "cannot create bridge $bridge"
    fi
    ip -4 addr show dev "$bridge" | grep -q "inet ${cidr%/*}/" || ip addr add "$cidr" dev "$bridge"
    ip link set "$bridge" up
    if [ -f "${IN[1]:-}$pidfile" ] && ! kill -0 "$(cat "${IN[1]:-}$pidfile")" 2>/dev/null; then
        rm -f "${IN[1]:-}$pidfile"
    fi
    rm -f "$sock"
    # The image store is a daemon.json feature (no flag): one file per engine, inside the root it runs in.
    local config=/etc/stackctl-$name.json
    printf '{"features": {"containerd-snapshotter": %s}}\n' "$snapshotter" >"${IN[1]:-}$config"
    log "$name: starting dockerd 26 (containerd store: $snapshotter) on $link, bridge $bridge (log: $log)"
    printf '\n=== %s engine26.sh starting dockerd ===\n' "$(date -u +%FT%TZ)" >>"$log"
    setsid nohup "${IN[@]}" /usr/sbin/dockerd --host "unix://$sock" --data-root "$data" --exec-root "$exec" \
        --pidfile "$pidfile" --bridge "$bridge" --iptables=false --ip-masq=false --ip6tables=false \
        --config-file "$config" --containerd-namespace "stackctl-$name" \
        --containerd-plugins-namespace "stackctl-$name-plugins" --cgroup-parent "stackctl-$name" \
        --insecure-registry "$REGISTRY_ADDR" >>"$log" 2>&1 </dev/null 9>&- &
    local pid=$! deadline=$((SECONDS + 90))
    until answers; do
        kill -0 $pid 2>/dev/null || die "$name: dockerd exited" "$log"
        [ $SECONDS -lt $deadline ] || die "$name did not answer on $link within 90 s" "$log"
        sleep 1
    done
}

for spec in "${ENGINES[@]}"; do
    # shellcheck disable=SC2086
    start_engine $spec
    name=${spec%% *}
    d() { DOCKER_HOST=unix:///run/stackctl-$name.sock docker "$@"; }
    log "$name: $(d version --format 'server {{.Server.Version}} (API {{.Server.APIVersion}})'), store: $(d info --format '{{.Driver}}{{range .DriverStatus}} {{index . 0}}={{index . 1}}{{end}}' 2>/dev/null | cut -c1-80)"
    if d image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
        log "$name: base image $BASE_IMAGE present"
    else
        d pull -q "$REGISTRY_ADDR/$BASE_IMAGE" >/dev/null || die "$name: pull of $REGISTRY_ADDR/$BASE_IMAGE failed" "$LOG_DIR/stackctl-$name.log"
        d tag "$REGISTRY_ADDR/$BASE_IMAGE" "$BASE_IMAGE"
        log "$name: base image pulled from $REGISTRY_ADDR"
    fi
    echo "STACKCTL_TEST_ENGINE_${name^^}=unix:///run/stackctl-$name.sock"
done
docker buildx version >/dev/null 2>&1 || die "the docker CLI finds no buildx plugin"
log "buildx: $(docker buildx version)"
