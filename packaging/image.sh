#!/usr/bin/env bash
# Builds the container image from the unchanged Dockerfile and starts its daemon, on a machine where the
# Dockerfile's base images cannot be pulled and containers cannot be run (podman run needs cgroups):
#   1. local stand-ins for the base images, made with debootstrap --variant=minbase bookworm:
#      `debian:bookworm-slim` (the minbase root) and `rust:1-bookworm` (the same root with gcc/libc6-dev and
#      this machine's rustup toolchain at the official rust image's paths: /usr/local/rustup,
#      /usr/local/cargo/bin on PATH), imported with `podman import`;
#   2. `podman build --isolation chroot --format docker` of the Dockerfile (a release build inside);
#   3. the image's file system (a `buildah from` container, mounted) entered with chroot in its own
#      network namespace: its ENTRYPOINT + CMD as uid 10001, the image's ENV, a tokens file bind-mounted
#      at /run/secrets/thresher-tokens and a host directory as the /data volume; then /healthz, 401 without
#      a token, an authenticated POST /v1/samples and GET /v1/model, and SIGTERM: exit 0 with the final
#      checkpoint in /data.
# Prints a report (markdown) on stdout; progress on stderr. Root, Debian 12; installs podman, buildah and
# debootstrap with apt-get when missing. Slow (a release build in the image): a script, not a CI step.
#   bash packaging/image.sh > report.md        (WORK=DIR keeps the roots, default target/image; TAG=NAME)
#   RUN_ONLY=1 TAG=NAME bash packaging/image.sh  (step 3 alone, on an image already built)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
WORK=${WORK:-$REPO/target/image}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
TAG=${TAG:-localhost/thresher:image-sh}
TOOLCHAIN=${TOOLCHAIN:-$(rustup toolchain list | awk '/default/ {print $1; exit}')}
RUSTUP_DIR=${RUSTUP_HOME:-$HOME/.rustup}
log() { printf '[image.sh %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
need=()
for t in podman buildah debootstrap; do command -v "$t" >/dev/null || need+=("$t"); done
if [ ${#need[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
mkdir -p "$WORK"
export CONTAINERS_CONF="$WORK/containers.conf"
printf '[containers]\ndefault_ulimits = []\n' > "$CONTAINERS_CONF"
t_start=$(date +%s)

# 1. Base images (RUN_ONLY=1: skip 1 and 2, start the image TAG already built).
t_bases=$t_start; t_built=$t_start
if [ "${RUN_ONLY:-}" != 1 ]; then
if ! podman image exists debian:bookworm-slim; then
  log "debootstrap minbase bookworm -> debian:bookworm-slim"
  rm -rf "$WORK/slim"
  debootstrap --variant=minbase bookworm "$WORK/slim" "$MIRROR" >/dev/null
  # What the official slim image leaves out: docs, man pages, locales, apt lists and caches; and the
  # apt/dpkg settings it ships (debuerreotype's), which keep later `apt-get install` layers as small:
  # downloaded .debs deleted after install, no translations, docs/man/locales never unpacked.
  rm -rf "$WORK"/slim/usr/share/{doc,man,info,locale,groff,lintian,linda}/* "$WORK"/slim/var/lib/apt/lists/* "$WORK"/slim/var/cache/apt/*.bin
  cat > "$WORK/slim/etc/apt/apt.conf.d/docker-clean" <<'APT'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT
  echo 'Acquire::Languages "none";' > "$WORK/slim/etc/apt/apt.conf.d/docker-no-languages"
  echo 'Acquire::GzipIndexes "true";' > "$WORK/slim/etc/apt/apt.conf.d/docker-gzip-indexes"
  echo 'Apt::AutoRemove::SuggestsImportant "false";' > "$WORK/slim/etc/apt/apt.conf.d/docker-autoremove-suggests"
  printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
    'path-exclude /usr/share/man/*' 'path-exclude /usr/share/groff/*' 'path-exclude /usr/share/info/*' \
    'path-exclude /usr/share/lintian/*' 'path-exclude /usr/share/linda/*' 'path-exclude /usr/share/locale/*' \
    > "$WORK/slim/etc/dpkg/dpkg.cfg.d/docker"
  tar -C "$WORK/slim" -c . | podman import --change 'CMD ["bash"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - debian:bookworm-slim >/dev/null
fi
if ! podman image exists rust:1-bookworm; then
  log "debootstrap minbase bookworm + gcc, libc6-dev + $TOOLCHAIN -> rust:1-bookworm"
  rm -rf "$WORK/rust"
  debootstrap --variant=minbase --include=gcc,libc6-dev,ca-certificates,curl bookworm "$WORK/rust" "$MIRROR" >/dev/null
  tc="$WORK/rust/usr/local/rustup/toolchains/$TOOLCHAIN"
  mkdir -p "$tc" "$WORK/rust/usr/local/cargo/bin"
  cp -a "$RUSTUP_DIR/toolchains/$TOOLCHAIN"/{bin,lib,libexec} "$tc/"
  printf 'version = "12"\ndefault_toolchain = "%s"\nprofile = "minimal"\n' "$TOOLCHAIN" \
    > "$WORK/rust/usr/local/rustup/settings.toml"
  cp "$(command -v rustup)" "$WORK/rust/usr/local/cargo/bin/rustup"
  for p in cargo rustc rustdoc; do ln "$WORK/rust/usr/local/cargo/bin/rustup" "$WORK/rust/usr/local/cargo/bin/$p"; done
  rm -rf "$WORK"/rust/var/lib/apt/lists/* "$WORK"/rust/var/cache/apt/archives/*.deb
  # The host's CA bundle: where a proxy re-signs TLS, cargo inside the build must trust what the host does.
  cp /etc/ssl/certs/ca-certificates.crt "$WORK/rust/etc/ssl/certs/ca-certificates.crt"
  tar -C "$WORK/rust" -c . | podman import \
    --change 'ENV RUSTUP_HOME=/usr/local/rustup' --change 'ENV CARGO_HOME=/usr/local/cargo' \
    --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' - rust:1-bookworm >/dev/null
fi
t_bases=$(date +%s)

# 2. The Dockerfile, unchanged.
log "podman build --isolation chroot (release build inside the image)"
podman build --isolation chroot --format docker -t "$TAG" -f Dockerfile . > "$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log" >&2; exit 1; }
t_built=$(date +%s)
fi
size=$(podman image inspect "$TAG" --format '{{.Size}}')
entry=$(podman image inspect "$TAG" --format '{{json .Config.Entrypoint}}')
cmd=$(podman image inspect "$TAG" --format '{{json .Config.Cmd}}')
user=$(podman image inspect "$TAG" --format '{{.Config.User}}')
mapfile -t image_env < <(podman image inspect "$TAG" --format '{{range .Config.Env}}{{println .}}{{end}}' | sed '/^$/d')
# A container runtime's PATH when the image sets none (podman's and docker's default).
printf '%s\n' "${image_env[@]}" | grep -q '^PATH=' \
  || image_env=("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" "${image_env[@]}")
mapfile -t argv < <(python3 -c 'import json,sys; [print(a) for a in json.loads(sys.argv[1]) + json.loads(sys.argv[2])]' "$entry" "$cmd")
bin_size=$(ctr0=$(buildah from "$TAG"); m0=$(buildah mount "$ctr0"); stat -c %s "$m0/usr/local/bin/thresher"; buildah umount "$ctr0" >/dev/null; buildah rm "$ctr0" >/dev/null)

# 3. Start it from the image's file system.
ctr=$(buildah from "$TAG")
mnt=$(buildah mount "$ctr")
run=$(mktemp -d)
cleanup() {
  [ -n "${pid:-}" ] && kill -KILL "$pid" 2>/dev/null || true
  umount "$mnt/proc" "$mnt/data" "$mnt/run/secrets/thresher-tokens" 2>/dev/null || true
  buildah umount "$ctr" >/dev/null 2>&1 || true
  buildah rm "$ctr" >/dev/null 2>&1 || true
  rm -rf "$run"
}
trap cleanup EXIT
write=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n'); read_t=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf 'write %s\nread %s\n' "$write" "$read_t" > "$run/tokens"
chown 10001 "$run/tokens"; chmod 600 "$run/tokens"
mkdir -p "$run/data"; chown 10001 "$run/data"
mkdir -p "$mnt/run/secrets"; touch "$mnt/run/secrets/thresher-tokens"
mount --bind "$run/tokens" "$mnt/run/secrets/thresher-tokens"
mount -o remount,bind,ro "$mnt/run/secrets/thresher-tokens"
mount --bind "$run/data" "$mnt/data"
mount -t proc proc "$mnt/proc"
log "start: ${argv[*]} as uid ${user} (10001) with ${image_env[*]}"
# Its own network namespace (a container's): 0.0.0.0:8080 is the image's, not the host's.
unshare --net --fork sh -c 'ip link set lo up 2>/dev/null || true; exec "$@"' sh \
  chroot --userspec=10001:10001 "$mnt" /usr/bin/env -i "${image_env[@]}" "${argv[@]}" \
  > "$run/stdout" 2> "$run/stderr" &
pid=$!
# unshare forks one child, which execs sh -> chroot -> env -> the daemon: that child is the daemon.
daemon_pid=
for _ in $(seq 100); do
  daemon_pid=$(pgrep -P "$pid" | head -1 || true)
  [ -n "$daemon_pid" ] && [ "$(cat "/proc/$daemon_pid/comm" 2>/dev/null)" = thresher ] && break
  sleep 0.1
done
if [ "$(cat "/proc/${daemon_pid:-0}/comm" 2>/dev/null)" != thresher ]; then
  log "the daemon did not start:"; cat "$run/stderr" >&2; exit 1
fi
netns_pid=$daemon_pid
in_ns() { nsenter --net="/proc/$netns_pid/ns/net" "$@"; }
for _ in $(seq 100); do in_ns curl -fsS http://127.0.0.1:8080/healthz >/dev/null 2>&1 && break; sleep 0.1; done
healthz=$(in_ns curl -sS -w ' %{http_code}' http://127.0.0.1:8080/healthz)
noauth=$(in_ns curl -sS -o /dev/null -w '%{http_code}' -XPOST -H 'Content-Type: text/plain' --data-binary $'1 1:1\n' http://127.0.0.1:8080/v1/samples)
body=$(python3 -c '
import random; r = random.Random(1)
for i in range(2000):
    x = [r.gauss(0, 1) for _ in range(20)]
    print("%.6f %s" % (2*x[3] - 1.5*x[7] + 0.01*r.gauss(0, 1), " ".join("%d:%.6f" % (j, v) for j, v in enumerate(x))))')
post=$(printf '%s\n' "$body" | in_ns curl -sS -w ' %{http_code}' -XPOST -H "Authorization: Bearer $write" \
  -H 'Content-Type: text/plain' --data-binary @- http://127.0.0.1:8080/v1/samples)
for _ in $(seq 100); do
  model=$(in_ns curl -sS -H "Authorization: Bearer $read_t" http://127.0.0.1:8080/v1/model)
  case "$model" in *'"samples_seen":2000'*) break ;; esac; sleep 0.1
done
get=$(in_ns curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $read_t" http://127.0.0.1:8080/v1/model)
uid=$(awk '/^Uid:/ {print $2}' "/proc/$daemon_pid/status" 2>/dev/null || echo "?")
log "SIGTERM to the daemon (pid $daemon_pid, uid $uid)"
t_term=$(date +%s.%N)
kill -TERM "$daemon_pid"
set +e; wait "$pid"; status=$?; set -e
pid=
t_exit=$(date +%s.%N)
ckpt=$(ls -l "$run/data")
t_end=$(date +%s)
commit=$(git rev-parse --short HEAD)
cat <<REPORT
Run of \`bash packaging/image.sh\` at commit \`$commit\`, $(date -u +%Y-%m-%dT%H:%MZ), on $(nproc) shared cores.

| step | result |
| --- | --- |
| base images (debootstrap + import) | $( [ "${RUN_ONLY:-}" = 1 ] && echo "skipped (RUN_ONLY=1)" || echo "$((t_bases - t_start)) s (0 when already imported)") |
| \`podman build\` of the unchanged \`Dockerfile\` | $( [ "${RUN_ONLY:-}" = 1 ] && echo "skipped (RUN_ONLY=1)" || echo "$((t_built - t_bases)) s") |
| image \`$TAG\` | **$(numfmt --to=iec-i --suffix=B "$size")** ($size bytes); \`/usr/local/bin/thresher\` $(numfmt --to=iec-i --suffix=B "$bin_size") |
| ENTRYPOINT + CMD | \`$entry\` + \`$cmd\`, USER \`$user\` |
| daemon's uid (from /proc) | $uid |
| \`GET /healthz\` | \`$healthz\` |
| \`POST /v1/samples\` without a token | $noauth |
| \`POST /v1/samples\` (write token), 2000 LIBSVM lines | \`$post\` |
| \`GET /v1/model\` (read token) | $get: \`$(printf '%s' "$model" | cut -c1-160)...\` |
| SIGTERM | exit status $status after $(python3 -c "print('%.2f' % ($t_exit - $t_term))") s |
| \`/data\` after the stop | \`$(printf '%s' "$ckpt" | tail -n +2 | awk '{print $1, $3, $5, $NF}' | tr '\n' ' ')\` |

Layers (\`podman history\`, newest first; the last is the base image, here the debootstrap stand-in):

\`\`\`
$(podman history --format '{{.Size}}\t{{.CreatedBy}}' "$TAG" | cut -c1-150)
\`\`\`

The daemon's log (stderr):

\`\`\`
$(cut -c1-220 "$run/stderr")
\`\`\`
REPORT
[ "$status" = 0 ] && [ -s "$run/data/thresher.ckpt" ] && [ "$get" = 200 ] && [ "$noauth" = 401 ]
