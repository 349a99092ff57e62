#!/usr/bin/env bash
# Builds switchyard:scratch without pulling a base image.
#
#   deploy/docker/build-scratch.sh [release|debug]      (default: release)
#
# 1. builds `switchyard` and `switchyard-sim` on this host (Debian: needs only rustc/cargo);
# 2. assembles a root filesystem: the binaries, the shared libraries `ldd` lists for them
#    (glibc ≥ 2.34 carries its DNS and files resolvers inside libc.so.6, so name lookups of
#    Raft peers and workers work without NSS plugins), a passwd/group entry for the non-root
#    user 65532, nsswitch.conf, the reference config and a writable data directory;
# 3. builds `FROM scratch` with whichever builder exists: buildah, podman or docker.
set -euo pipefail
profile="${1:-release}"
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$repo"

if [[ "$profile" == release ]]; then
  cargo build --release --locked --no-default-features --features mimalloc -p switchyard-gateway -p switchyard-sim --bins
else
  cargo build --locked --no-default-features --features mimalloc -p switchyard-gateway -p switchyard-sim --bins
fi
bin="${CARGO_TARGET_DIR:-$repo/target}/$profile"

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
root="$ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/switchyard" "$root/var/lib" "$root/tmp" "$ctx/data"
cp "$bin/switchyard" "$bin/switchyard-sim" "$root/usr/local/bin/"
for exe in "$bin/switchyard" "$bin/switchyard-sim"; do
  ldd "$exe" | awk '/=> \//{print $3} /^[ \t]*\/lib/{print $1}' | while read -r lib; do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
  done
done
cp config/switchyard.toml "$root/etc/switchyard/switchyard.toml"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > "$root/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$root/etc/group"
printf 'hosts: files dns\n' > "$root/etc/nsswitch.conf"
cp "$here/Dockerfile.scratch" "$ctx/Dockerfile"
# /tmp must be writable by everyone (mode set in the archive the builder reads); the data
# directory is created by `COPY --chown` in Dockerfile.scratch, owned by the non-root user.
tar -C "$ctx" --owner=0 --group=0 -cf "$ctx/ctx.tar" Dockerfile data
tar -C "$ctx" --owner=0 --group=0 --exclude=rootfs/tmp -rf "$ctx/ctx.tar" rootfs
tar -C "$ctx" --owner=0 --group=0 --mode=1777 --no-recursion -rf "$ctx/ctx.tar" rootfs/tmp

tag="${IMAGE_TAG:-switchyard:scratch}"
if command -v buildah >/dev/null 2>&1; then
  buildah bud -t "$tag" - < "$ctx/ctx.tar"
elif command -v podman >/dev/null 2>&1; then
  podman build -t "$tag" - < "$ctx/ctx.tar"
elif command -v docker >/dev/null 2>&1; then
  docker build -t "$tag" - < "$ctx/ctx.tar"
else
  echo "no image builder (buildah, podman or docker) found" >&2
  exit 1
fi
echo "built $tag"
