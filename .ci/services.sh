#!/usr/bin/env bash
# Bring up the local services the integration tests need:
#   * a Docker engine answering on /var/run/docker.sock
#   * a plain (no auth) registry on 127.0.0.1:5000
#   * the base image stackctl-base:bookworm (debootstrap'ed, imported, pushed)
#   * a second engine on /run/stackctl-engine2.sock with its own bridge (.ci/engine2.sh)
#   * Docker 26.1 with buildx, on the overlay2 store (/run/stackctl-d26.sock) and on the containerd image store
#     (/run/stackctl-d26c.sock), and the buildx plugin for this machine's docker CLI (.ci/engine26.sh)
#
# Runs as root on Debian bookworm. Idempotent: a second run only checks what
# is already there (and re-imports the cached rootfs if the engine lost it).
#
# Optional overrides:
#   STACKCTL_DEBIAN_MIRROR  mirror URL for debootstrap (default: read from apt sources)
set -euo pipefail

SUITE=bookworm
DOCKER_SOCK=/var/run/docker.sock
DOCKERD_LOG=/var/log/stackctl-dockerd.log
REGISTRY_ADDR=127.0.0.1:5000
REGISTRY_HOST=127.0.0.1
REGISTRY_PORT=5000
REGISTRY_ROOT=/var/lib/stackctl-registry
REGISTRY_CONFIG=/etc/stackctl/registry.yml
REGISTRY_LOG=/var/log/stackctl-registry.log
APT_LOG=/var/log/stackctl-apt.log
DEBOOTSTRAP_LOG=/var/log/stackctl-debootstrap.log
CACHE_DIR=/var/cache/stackctl
ROOTFS_TAR=$CACHE_DIR/$SUITE-rootfs.tar
BASE_IMAGE=stackctl-base:$SUITE
REMOTE_BASE_IMAGE=$REGISTRY_ADDR/$BASE_IMAGE
LOCK_FILE=/run/lock/stackctl-services.lock

export DEBIAN_FRONTEND=noninteractive
export DOCKER_HOST=unix://$DOCKER_SOCK

log() { printf '[services] %s\n' "$*"; }

die() {
    printf '[services] ERROR: %s\n' "$1" >&2
    if [ $# -ge 2 ] && [ -f "$2" ]; then
        printf '[services] --- last lines of %s ---\n' "$2" >&2
        tail -n 40 "$2" >&2 || true
    fi
    exit 1
}

if [ "$(id -u)" -ne 0 ]; then
    die "must run as root"
fi

# Serialise concurrent runs.
mkdir -p "$(dirname "$LOCK_FILE")"
exec 9>"$LOCK_FILE"
flock -w 600 9 || die "another run of services.sh holds $LOCK_FILE"

# --------------------------------------------------------------------------
# Packages
# --------------------------------------------------------------------------
# skopeo copies a build's OCI image layout to the registry (publish).
# chromium: the tests open `report --html` in a real headless browser.
PACKAGES=(docker.io docker-registry debootstrap skopeo chromium)
missing=()
for pkg in "${PACKAGES[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing+=("$pkg")
    fi
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing: ${missing[*]} (log: $APT_LOG)"
    apt-get update >>"$APT_LOG" 2>&1 || die "apt-get update failed" "$APT_LOG"
    apt-get install -y "${missing[@]}" >>"$APT_LOG" 2>&1 \
        || die "apt-get install failed" "$APT_LOG"
else
    log "packages present: ${PACKAGES[*]}"
fi

# Debian's CLI speaks the engine's API (1.41). A newer CLI earlier on PATH
# usually negotiates down, but pin the version when falling back to it.
if [ -x /usr/bin/docker ]; then
    DOCKER=/usr/bin/docker
else
    DOCKER=$(command -v docker) || die "no docker CLI found"
    export DOCKER_API_VERSION=1.41
fi

# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------
engine_answers() {
    timeout 10 "$DOCKER" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# Print the HTTP status code of GET http://HOST:PORT/PATH (empty if no answer).
# Pure bash so it works before curl/wget exist.
http_status() {
    local host=$1 port=$2 path=$3
    # shellcheck disable=SC2016  # expanded by the inner bash
    timeout 5 bash -c '
        exec 3<>"/dev/tcp/$1/$2" || exit 1
        printf "GET %s HTTP/1.0\r\nHost: %s:%s\r\nConnection: close\r\n\r\n" "$3" "$1" "$2" >&3
        IFS= read -r line <&3 || exit 1
        printf "%s\n" "$line"
    ' _ "$host" "$port" "$path" 2>/dev/null | awk '{print $2}' || true
}

registry_status() { http_status "$REGISTRY_HOST" "$REGISTRY_PORT" /v2/; }

# Print the first Debian mirror URL configured for $SUITE in the apt sources.
find_mirror() {
    local files=() f
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 1
    awk -v suite="$SUITE" '
        function usable(uri) { return uri ~ /^(https?:\/\/|file:\/)/ }
        function offer(uri, s) {
            if (!usable(uri)) return
            if (s == suite && exact == "") exact = uri
            else if (s !~ /-(security|updates|backports|proposed-updates)$/ && s !~ /\// && other == "") other = uri
        }
        function flush(   i, j, nt, nu, ns, t, u, s, isdeb) {
            if (!inpar) return
            inpar = 0
            if (tolower(en) == "no") { ty = ur = su = en = ""; return }
            nt = split(ty, t, /[ \t]+/); isdeb = 0
            for (i = 1; i <= nt; i++) if (t[i] == "deb") isdeb = 1
            if (isdeb) {
                nu = split(ur, u, /[ \t]+/); ns = split(su, s, /[ \t]+/)
                for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) if (u[i] != "" && s[j] != "") offer(u[i], s[j])
            }
            ty = ur = su = en = ""
        }
        FNR == 1 { flush(); deb822 = (FILENAME ~ /\.sources$/) }
        deb822 {
            if ($0 ~ /^[ \t]*#/) next
            if ($0 ~ /^[ \t]*$/) { flush(); next }
            if ($0 ~ /^[ \t]/) next                       # continuation line
            inpar = 1
            key = tolower($0); sub(/:.*/, "", key)
            val = $0; sub(/^[^:]*:[ \t]*/, "", val)
            if (key == "types") ty = val
            else if (key == "uris") ur = val
            else if (key == "suites") su = val
            else if (key == "enabled") en = val
            next
        }
        {
            line = $0; sub(/#.*/, "", line)
            gsub(/\[[^]]*\]/, "", line)                   # [signed-by=...] etc.
            n = split(line, w, /[ \t]+/); k = 0
            for (i = 1; i <= n; i++) if (w[i] != "") v[++k] = w[i]
            if (k >= 3 && v[1] == "deb") offer(v[2], v[3])
        }
        END {
            flush()
            if (exact != "") print exact; else if (other != "") print other
        }
    ' "${files[@]}" | sed 's:/*$::' | head -n 1
}

# --------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------
if engine_answers; then
    log "engine: already running"
else
    [ -x /usr/sbin/dockerd ] || die "/usr/sbin/dockerd not found"
    log "engine: starting dockerd (log: $DOCKERD_LOG)"
    # A socket left behind by a dead daemon would make the wait below lie.
    if [ -S "$DOCKER_SOCK" ] && ! pgrep -x dockerd >/dev/null; then
        rm -f "$DOCKER_SOCK"
    fi
    printf '\n=== %s services.sh starting dockerd ===\n' "$(date -u +%FT%TZ)" >>"$DOCKERD_LOG"
    setsid nohup /usr/sbin/dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &
    deadline=$((SECONDS + 60))
    until engine_answers; do
        [ $SECONDS -lt $deadline ] || die "engine did not answer on $DOCKER_SOCK within 60 s" "$DOCKERD_LOG"
        sleep 1
    done
fi
"$DOCKER" version >/dev/null 2>&1 || die "'$DOCKER version' failed: $("$DOCKER" version 2>&1 | tail -n 3)"
log "engine: $("$DOCKER" version --format 'server {{.Server.Version}} (API {{.Server.APIVersion}}), client {{.Client.Version}}')"

# --------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------
mkdir -p "$(dirname "$REGISTRY_CONFIG")" "$REGISTRY_ROOT"
config_tmp=$(mktemp)
cat >"$config_tmp" <<EOF
# Written by .ci/services.sh
version: 0.1
log:
  level: info
  fields:
    service: stackctl-registry
storage:
  filesystem:
    rootdirectory: $REGISTRY_ROOT
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: $REGISTRY_ADDR
  headers:
    X-Content-Type-Options: [nosniff]
health:
  storagedriver:
    enabled: true
    interval: 10s
    threshold: 3
EOF
if cmp -s "$config_tmp" "$REGISTRY_CONFIG"; then
    rm -f "$config_tmp"
else
    mv "$config_tmp" "$REGISTRY_CONFIG"
    chmod 0644 "$REGISTRY_CONFIG"
fi

status=$(registry_status)
if [ "$status" = "200" ]; then
    log "registry: already answering on $REGISTRY_ADDR"
else
    if [ -n "$status" ]; then
        # Something else holds the port. On systemd hosts this is Debian's own
        # docker-registry.service (htpasswd auth); replace it with ours.
        if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet docker-registry 2>/dev/null; then
            log "registry: stopping docker-registry.service (answers $status, needs auth)"
            systemctl disable --now docker-registry >/dev/null 2>&1 || true
        else
            die "port $REGISTRY_PORT answers /v2/ with HTTP $status; expected an unauthenticated registry"
        fi
    fi
    [ -x /usr/bin/docker-registry ] || die "/usr/bin/docker-registry not found"
    log "registry: starting docker-registry (log: $REGISTRY_LOG)"
    printf '\n=== %s services.sh starting docker-registry ===\n' "$(date -u +%FT%TZ)" >>"$REGISTRY_LOG"
    setsid nohup /usr/bin/docker-registry serve "$REGISTRY_CONFIG" >>"$REGISTRY_LOG" 2>&1 </dev/null 9>&- &
    deadline=$((SECONDS + 30))
    until [ "$(registry_status)" = "200" ]; do
        [ $SECONDS -lt $deadline ] || die "registry did not answer http://$REGISTRY_ADDR/v2/ within 30 s" "$REGISTRY_LOG"
        sleep 1
    done
    log "registry: answering on $REGISTRY_ADDR"
fi

# --------------------------------------------------------------------------
# Base image
# --------------------------------------------------------------------------
if "$DOCKER" image inspect "$BASE_IMAGE" >/dev/null 2>&1; then
    log "base image: $BASE_IMAGE present"
else
    mkdir -p "$CACHE_DIR"
    if [ ! -s "$ROOTFS_TAR" ]; then
        mirror=${STACKCTL_DEBIAN_MIRROR:-$(find_mirror || true)}
        [ -n "$mirror" ] || die "no Debian mirror for '$SUITE' found in /etc/apt/sources.list{,.d/*}; set STACKCTL_DEBIAN_MIRROR"
        rootfs=$CACHE_DIR/rootfs.tmp
        rm -rf "$rootfs"
        log "base image: debootstrap $SUITE from $mirror (log: $DEBOOTSTRAP_LOG)"
        debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
            "$SUITE" "$rootfs" "$mirror" >"$DEBOOTSTRAP_LOG" 2>&1 \
            || { rm -rf "$rootfs"; die "debootstrap failed" "$DEBOOTSTRAP_LOG"; }
        # Trim what a container image does not need.
        rm -rf "${rootfs:?}"/var/cache/apt/archives/*.deb "${rootfs:?}"/var/lib/apt/lists/* \
            "${rootfs:?}"/dev/* "${rootfs:?}"/proc/* "${rootfs:?}"/sys/* "${rootfs:?}"/tmp/*
        find "$rootfs"/var/log -type f -delete
        mkdir -p "$rootfs"/var/lib/apt/lists/partial
        tar --numeric-owner -C "$rootfs" -cf "$ROOTFS_TAR.tmp" . || die "tar of rootfs failed"
        mv "$ROOTFS_TAR.tmp" "$ROOTFS_TAR"
        rm -rf "$rootfs"
        log "base image: cached rootfs at $ROOTFS_TAR ($(du -h "$ROOTFS_TAR" | cut -f1))"
    else
        log "base image: importing cached $ROOTFS_TAR"
    fi
    "$DOCKER" import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        - "$BASE_IMAGE" <"$ROOTFS_TAR" >/dev/null || die "docker import failed"
    log "base image: imported $BASE_IMAGE"
fi

venv_out=$("$DOCKER" run --rm --network none "$BASE_IMAGE" \
    sh -c 'python3 -m venv /tmp/v && /tmp/v/bin/python -c "import sys; print(sys.version.split()[0])"' 2>&1) \
    || die "python3 -m venv failed in $BASE_IMAGE: $venv_out"
log "base image: python3 -m venv works (python $venv_out)"

"$DOCKER" tag "$BASE_IMAGE" "$REMOTE_BASE_IMAGE"
push_log=$(mktemp)
if ! "$DOCKER" push "$REMOTE_BASE_IMAGE" >"$push_log" 2>&1; then
    cat "$push_log" >&2; rm -f "$push_log"
    die "push of $REMOTE_BASE_IMAGE failed"
fi
digest=$(sed -n 's/.*digest: \(sha256:[0-9a-f]*\).*/\1/p' "$push_log" | tail -n 1)
rm -f "$push_log"
log "registry: pushed $REMOTE_BASE_IMAGE ${digest:+($digest)}"

# --------------------------------------------------------------------------
# Second engine (engine-pool tests): its own socket, data, exec root and bridge; see .ci/engine2.sh
# --------------------------------------------------------------------------
bash "$(dirname "$0")/engine2.sh" 9>&- || die "the second engine did not start (.ci/engine2.sh)"

# --------------------------------------------------------------------------
# The BuildKit engines of Docker 26 (both image stores) and the buildx plugin; see .ci/engine26.sh
# --------------------------------------------------------------------------
bash "$(dirname "$0")/engine26.sh" 9>&- || die "the Docker 26 engines did not start (.ci/engine26.sh)"

echo "STACKCTL_TEST_REGISTRY=$REGISTRY_ADDR"
echo "STACKCTL_TEST_BASE_IMAGE=$BASE_IMAGE"
