#!/usr/bin/env bash
# Start a second Docker engine on this machine, for the engine-pool tests (`stackctl build --all --engine`):
# its own data-root, exec-root, socket, pid file and bridge, beside the engine of /var/run/docker.sock and
# sharing nothing with it but the loopback registry it pulls the base image from.
#
#   sudo bash .ci/engine2.sh        # then: --engine second=unix:///run/stackctl-engine2.sock
#
# The bridge is its own (stk1, created here) because an engine given `--bridge=none` deletes the host's
# docker0, which the first engine owns; `--iptables=false --ip-masq=false` keeps it away from the first
# engine's rules (its containers need no route out: the builds are offline). Idempotent: a second run
# only checks. Runs as root; .ci/services.sh calls it after the registry and base image are up.
#
# Optional overrides:
#   STACKCTL_ENGINE2_BRIDGE  bridge name (default stk1)
#   STACKCTL_ENGINE2_CIDR    its address (default 192.168.213.1/24)
set -euo pipefail

NAME=stackctl-engine2
BRIDGE=${STACKCTL_ENGINE2_BRIDGE:-stk1}
CIDR=${STACKCTL_ENGINE2_CIDR:-192.168.213.1/24}
SOCK=/run/$NAME.sock
DATA_ROOT=/var/lib/$NAME
EXEC_ROOT=/run/$NAME
PIDFILE=/run/$NAME.pid
LOG=/var/log/$NAME.log
REGISTRY_ADDR=127.0.0.1:5000
BASE_IMAGE=stackctl-base:bookworm

log() { printf '[engine2] %s\n' "$*"; }
die() {
    printf '[engine2] ERROR: %s\n' "$1" >&2
    [ $# -ge 2 ] && [ -f "$2" ] && tail -n 40 "$2" >&2
    exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root"
if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=$(command -v docker) || die "no docker CLI"; fi
d2() { DOCKER_HOST=unix://$SOCK DOCKER_API_VERSION=1.41 "$DOCKER" "$@"; }
answers() { timeout 10 env DOCKER_HOST="unix://$SOCK" DOCKER_API_VERSION=1.41 "$DOCKER" version >/dev/null 2>&1; }

if answers; then
    log "already running on $SOCK"
else
    [ -x /usr/sbin/dockerd ] || die "/usr/sbin/dockerd not found"
    if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
        ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
    fi
    ip -4 addr show dev "$BRIDGE" | grep -q "inet ${CIDR%/*}/" || ip addr add "$CIDR" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    # A socket or pid file left by a dead daemon would make the wait below lie, or the start refuse.
    if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then rm -f "$PIDFILE"; fi
    [ -f "$PIDFILE" ] || rm -f "$SOCK"
    mkdir -p "$DATA_ROOT" "$EXEC_ROOT"
    log "starting dockerd on $SOCK, bridge $BRIDGE (log: $LOG)"
    printf '\n=== %s engine2.sh starting dockerd ===\n' "$(date -u +%FT%TZ)" >>"$LOG"
    setsid nohup /usr/sbin/dockerd --host "unix://$SOCK" --data-root "$DATA_ROOT" --exec-root "$EXEC_ROOT" \
        --pidfile "$PIDFILE" --bridge "$BRIDGE" --iptables=false --ip-masq=false \
        --containerd-namespace "$NAME" --containerd-plugins-namespace "$NAME-plugins" \
        --cgroup-parent "$NAME" >>"$LOG" 2>&1 </dev/null 9>&- &
    deadline=$((SECONDS + 60))
    until answers; do
        [ $SECONDS -lt $deadline ] || die "the second engine did not answer on $SOCK within 60 s" "$LOG"
        sleep 1
    done
fi
log "$(d2 version --format 'server {{.Server.Version}} (API {{.Server.APIVersion}})')"

# 127.0.0.0/8 is an insecure registry range by default (the first engine relies on it too).
if d2 image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base image: $BASE_IMAGE present"
else
    d2 pull -q "$REGISTRY_ADDR/$BASE_IMAGE" >/dev/null || die "pull of $REGISTRY_ADDR/$BASE_IMAGE failed" "$LOG"
    d2 tag "$REGISTRY_ADDR/$BASE_IMAGE" "$BASE_IMAGE"
    log "base image: pulled $REGISTRY_ADDR/$BASE_IMAGE"
fi
echo "STACKCTL_TEST_ENGINE2=unix://$SOCK"
