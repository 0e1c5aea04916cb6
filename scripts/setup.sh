#!/usr/bin/env bash
# Set up everything `make demo` and `make test` need on a Debian 12/13 x86_64 machine, as root:
#   - runc and busybox-static from the machine's own apt sources;
#   - containerd 1.7, the CRI API definition and the NRI/ttrpc sources (for the
#     wire-compatibility tests) from Debian 13 (trixie), downloaded through a
#     private apt configuration and extracted under .cache/ (nothing is installed system-wide,
#     the system's libc is never upgraded);
#   - containerd 2.1 and the NRI 0.8 sources from Debian sid, the same way;
#   - a virtual environment (.venv) with the project and its dev tools installed;
#   - CRI client stubs generated from the cri-api package, and locally built OCI images;
#   - what bcc needs for koordlet's run-queue latency probes: Debian's python3-bpfcc and kernel
#     headers, /lib/modules/$(uname -r)/{build,source} pointing at them when the running kernel
#     has none of its own, tracefs mounted, and bcc's Python module reachable from .venv;
#   - for the cgroup v2 tier: QEMU, Debian's 6.12 kernel (extracted, not installed) and the VM's
#     initramfs;
#   - the koordlet image from the Containerfile (podman, on a Debian base made with mmdebstrap
#     since no registry answers here), saved as an OCI archive for the DaemonSet test.
# Every step is skipped when its output is already there, so a second run takes about a second.
# Failures print one line saying what is missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE="$ROOT/.cache"
VENV="$ROOT/.venv"
CONTAINERD_VERSION="1.7.24~ds1-6+deb13u1"
CONTAINERD2_VERSION="2.1.9+ds1-5"
CRI_API_PKG="golang-github-kubernetes-cri-api-dev"
# Upstream NRI and ttrpc sources: the wire-compatibility tests compile their .proto files.
UPSTREAM_PKGS="golang-github-containerd-nri-dev golang-github-containerd-ttrpc-dev"
CRI_PROTO="$CACHE/cri-api/usr/share/gocode/src/k8s.io/cri-api/pkg/apis/runtime/v1/api.proto"
NRI_PROTO="$CACHE/upstream/usr/share/gocode/src/github.com/containerd/nri/pkg/api/api.proto"

die() { echo "setup: $*" >&2; exit 1; }
step() { echo "setup: $*"; }

check_machine() {
    [ "$(id -u)" = 0 ] || die "must run as root (containerd, runc and cgroups need it); try: sudo make ..."
    [ "$(uname -m)" = x86_64 ] || die "needs an x86_64 machine, this one is $(uname -m)"
    local id="" version=""
    if [ -r /etc/os-release ]; then
        id=$(. /etc/os-release && echo "${ID:-}")
        version=$(. /etc/os-release && echo "${VERSION_ID:-}")
    fi
    [ "$id" = debian ] || die "needs Debian 12 or 13, this is '${id:-unknown}' (/etc/os-release)"
    case "$version" in 12|13) ;; *) die "needs Debian 12 or 13, this is Debian '${version:-unknown}'" ;; esac
    [ -e /sys/fs/cgroup/cgroup.controllers ] || [ -d /sys/fs/cgroup/cpu ] \
        || die "no cgroup filesystem mounted at /sys/fs/cgroup (neither v1 nor v2)"
    command -v apt-get >/dev/null || die "apt-get not found"
    command -v dpkg-deb >/dev/null || die "dpkg-deb not found"
}

# Install Debian packages that are missing, from the machine's own apt sources.
apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    step "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed: check the apt sources in /etc/apt"
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 \
            || die "could not install ${missing[*]} with apt-get (is the Debian mirror reachable?)"
    fi
}

# The Debian mirror the machine already uses, for the private trixie source.
debian_mirror() {
    local uri=""
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources | head -n1 | awk '{print $1}')
    fi
    if [ -z "$uri" ] && [ -r /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list)
    fi
    echo "${uri:-http://deb.debian.org/debian}"
}

# Download packages from another Debian suite through a private apt configuration (nothing is
# added to the machine's own sources): private_apt_download SUITE DEST PACKAGE...
private_apt_download() {
    local suite=$1 dest=$2 apt="$CACHE/apt-$1" mirror
    shift 2
    mirror=$(debian_mirror)
    [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] || apt_install debian-archive-keyring
    rm -rf "$apt" "$dest"
    mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$dest"
    printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" "$suite" >"$apt/$suite.sources"
    local opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt"
        -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
    apt-get "${opts[@]}" update -qq >/dev/null 2>&1 \
        || die "could not read the Debian $suite package index from $mirror"
    (cd "$dest" && apt-get "${opts[@]}" download "$@" >/dev/null 2>&1) \
        || die "could not download $* from Debian $suite ($mirror)"
}

# containerd 1.7 (NRI v0.6.1), the CRI API .proto and the upstream NRI/ttrpc sources, from
# trixie, extracted into .cache/.
fetch_trixie_packages() {
    local stamp="$CACHE/trixie.stamp" want="containerd=$CONTAINERD_VERSION $CRI_API_PKG $UPSTREAM_PKGS"
    if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
        && [ -x "$CACHE/containerd/usr/bin/containerd" ] && [ -f "$CRI_PROTO" ] && [ -f "$NRI_PROTO" ]; then
        return 0
    fi
    step "downloading containerd $CONTAINERD_VERSION, $CRI_API_PKG and $UPSTREAM_PKGS from Debian trixie"
    # shellcheck disable=SC2086 # UPSTREAM_PKGS is a list
    private_apt_download trixie "$CACHE/debs" "containerd=$CONTAINERD_VERSION" "$CRI_API_PKG" $UPSTREAM_PKGS
    rm -rf "$CACHE/containerd" "$CACHE/cri-api" "$CACHE/upstream"
    dpkg-deb -x "$CACHE"/debs/containerd_*.deb "$CACHE/containerd"
    dpkg-deb -x "$CACHE"/debs/"$CRI_API_PKG"_*.deb "$CACHE/cri-api"
    local pkg
    for pkg in $UPSTREAM_PKGS; do dpkg-deb -x "$CACHE"/debs/"$pkg"_*.deb "$CACHE/upstream"; done
    "$CACHE/containerd/usr/bin/containerd" --version >/dev/null 2>&1 \
        || die "the extracted containerd does not run on this machine (libc too old?)"
    echo "$want" >"$stamp"
}

# containerd 2.1 (NRI v0.8.0) and the NRI 0.8 sources, from Debian sid, extracted into
# .cache/containerd-2.1 and .cache/upstream-0.8. sid moves on: when the pinned version is gone
# from it, the newest 2.x there is taken and named.
fetch_containerd2() {
    local stamp="$CACHE/containerd2.stamp" want="containerd=$CONTAINERD2_VERSION golang-github-containerd-nri-dev"
    if [ -f "$stamp" ] && [ -x "$CACHE/containerd-2.1/usr/bin/containerd" ] \
        && [ -d "$CACHE/upstream-0.8" ] && [ "$(head -n1 "$stamp")" = "$want" ]; then
        return 0
    fi
    step "downloading containerd $CONTAINERD2_VERSION and the NRI sources from Debian sid"
    if ! (private_apt_download sid "$CACHE/debs-sid" "containerd=$CONTAINERD2_VERSION" golang-github-containerd-nri-dev) 2>/dev/null; then
        step "containerd $CONTAINERD2_VERSION is no longer in sid; taking sid's containerd"
        private_apt_download sid "$CACHE/debs-sid" containerd golang-github-containerd-nri-dev
    fi
    rm -rf "$CACHE/containerd-2.1" "$CACHE/upstream-0.8"
    dpkg-deb -x "$CACHE"/debs-sid/containerd_*.deb "$CACHE/containerd-2.1"
    dpkg-deb -x "$CACHE"/debs-sid/golang-github-containerd-nri-dev_*.deb "$CACHE/upstream-0.8"
    local version
    version=$("$CACHE/containerd-2.1/usr/bin/containerd" --version 2>/dev/null) \
        || die "the extracted containerd 2 does not run on this machine (libc too old?)"
    case "$version" in *" v2."* | *" 2."*) ;; *) die "sid's containerd is not 2.x: $version" ;; esac
    printf '%s\n%s\n' "$want" "$version" >"$stamp"
}

# The version of Debian's current 6.12 kernel package ("6.12.57+deb12-amd64"), or nothing.
kernel_612_version() {
    { apt-cache depends linux-image-6.12-amd64 2>/dev/null || true; } \
        | sed -n 's/.*Depends: linux-image-//p' | head -n1
}

# The cgroup v2 tier's VM (tests/e2e/harness/vm.py): QEMU, Debian bookworm's 6.12 kernel with
# its modules (depmod'ed) and headers (for bcc in the guest), extracted into .cache/vm/kernel,
# never installed, and the initramfs built from busybox-static and the kernel's 9p modules.
setup_vm() {
    apt_install qemu-system-x86 kmod
    local root="$CACHE/vm/kernel" kver
    if ! ls "$root"/boot/vmlinuz-* >/dev/null 2>&1; then
        # apt-cache fails (100) on a package list that predates the 6.12 kernel: update once.
        kver=$(kernel_612_version)
        if [ -z "$kver" ]; then
            apt-get update -qq >/dev/null 2>&1 || true
            kver=$(kernel_612_version)
        fi
        [ -n "$kver" ] || die "no linux-image-6.12-amd64 in the machine's apt sources (for the cgroup v2 VM)"
        step "downloading Debian's kernel $kver and its headers for the cgroup v2 VM"
        local dl="$CACHE/debs-kernel"
        rm -rf "$dl" "$root"
        mkdir -p "$dl" "$root"
        (cd "$dl" && apt-get -o APT::Sandbox::User=root download "linux-image-$kver" "linux-headers-$kver" "linux-headers-${kver%-amd64}-common" >/dev/null 2>&1) \
            || die "could not download linux-image-$kver and its headers"
        local deb
        for deb in "$dl"/*.deb; do dpkg-deb -x "$deb" "$root"; done
        rm -rf "$dl"
        depmod -b "$root" "$kver" || die "depmod failed for the VM's kernel $kver"
        # The packages' build and source links are absolute: point them into the extracted tree.
        ln -sfn "$root/usr/src/linux-headers-$kver" "$root/lib/modules/$kver/build"
        ln -sfn "$root/usr/src/linux-headers-${kver%-amd64}-common" "$root/lib/modules/$kver/source"
    fi
    local stamp="$CACHE/vm/initramfs.stamp" want
    want="$(ls "$root"/boot/vmlinuz-*) $(cat "$ROOT/tests/e2e/harness/vm-init.sh" "$ROOT/tests/e2e/harness/vm.py" /bin/busybox | sha256sum | cut -d' ' -f1)"
    if [ -f "$CACHE/vm/initramfs.cpio" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    step "building the cgroup v2 VM's initramfs"
    (cd "$ROOT" && "$VENV/bin/python" -m tests.e2e.harness.vm --build-initramfs) \
        || die "could not build the VM's initramfs"
    echo "$want" >"$stamp"
}

# A Python >= 3.11 with a working venv module.
find_python() {
    local py
    for py in python3 python3.13 python3.12 python3.11; do
        if command -v "$py" >/dev/null \
            && "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$py"
            return 0
        fi
    done
    return 1
}

make_venv() {
    local stamp="$VENV/.koord-setup" want
    want=$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)
    if [ -x "$VENV/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        return 0
    fi
    local py
    py=$(find_python) || { apt_install python3 python3-venv; py=$(find_python) || die "no Python >= 3.11 found"; }
    if [ ! -x "$VENV/bin/python" ]; then
        step "creating the virtual environment .venv with $("$py" --version)"
        if ! "$py" -m venv "$VENV" >/dev/null 2>&1; then
            rm -rf "$VENV"
            apt_install python3-venv
            "$py" -m venv "$VENV" >/dev/null 2>&1 || die "python -m venv failed (install python3-venv)"
        fi
    fi
    step "installing koordinator-py and its dev tools into .venv"
    local log="$CACHE/pip.log"
    mkdir -p "$CACHE"
    "$VENV/bin/python" -m pip install -q --upgrade pip >"$log" 2>&1 \
        || die "pip could not upgrade itself (is PyPI reachable?), see $log"
    "$VENV/bin/python" -m pip install -q -e "$ROOT[dev]" >>"$log" 2>&1 \
        || die "pip install -e '.[dev]' failed (is PyPI reachable?), see $log"
    echo "$want" >"$stamp"
}

# helm-sdkpy: Helm's own engine as a library, for the chart tests (tests/unit/charts). It
# declares Python >= 3.12 but works on 3.11, hence --ignore-requires-python.
install_helm_sdkpy() {
    local version=0.1.32 log="$CACHE/pip-helm.log"
    if "$VENV/bin/python" -c "import cffi, importlib.metadata as m; assert m.version('helm-sdkpy') == '$version'" \
        >/dev/null 2>&1; then
        return 0
    fi
    step "installing helm-sdkpy $version (Helm's engine, for the chart tests) into .venv"
    mkdir -p "$CACHE"
    "$VENV/bin/python" -m pip install -q --ignore-requires-python "helm-sdkpy==$version" cffi pycparser \
        >"$log" 2>&1 || die "pip could not install helm-sdkpy==$version (is PyPI reachable?), see $log"
}

generate_cri_stubs() {
    local out="$CACHE/cri" stamp
    stamp="$(sha256sum "$CRI_PROTO" | cut -d' ' -f1) $("$VENV/bin/python" -c 'import grpc_tools; import importlib.metadata as m; print(m.version("grpcio-tools"))')"
    if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
        return 0
    fi
    step "generating CRI client stubs from $CRI_API_PKG"
    rm -rf "$out"
    (cd "$ROOT" && "$VENV/bin/python" -m tests.e2e.harness.crigen "$CRI_PROTO" "$out") \
        || die "could not generate the CRI client stubs"
    echo "$stamp" >"$out/stamp"
}

# promtool (Debian's prometheus package, extracted, not installed): checks /metrics in the tests.
fetch_promtool() {
    local out="$CACHE/prometheus"
    [ -x "$out/usr/bin/promtool" ] && return 0
    step "downloading promtool (Debian package prometheus)"
    rm -rf "$out" "$CACHE/debs-prometheus"
    mkdir -p "$CACHE/debs-prometheus"
    (cd "$CACHE/debs-prometheus" && apt-get download prometheus >/dev/null 2>&1) \
        || { apt-get update -qq >/dev/null 2>&1; (cd "$CACHE/debs-prometheus" && apt-get download prometheus >/dev/null 2>&1); } \
        || die "could not download the prometheus package (for promtool) from the Debian mirror"
    dpkg-deb -x "$CACHE"/debs-prometheus/prometheus_*.deb "$out"
    rm -rf "$CACHE/debs-prometheus"
    "$out/usr/bin/promtool" --version >/dev/null 2>&1 || die "the extracted promtool does not run"
}

build_images() {
    local out="$CACHE/images" stamp
    stamp="$(sha256sum /bin/busybox | cut -d' ' -f1) $(sha256sum "$ROOT/tests/e2e/harness/images.py" | cut -d' ' -f1)"
    if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
        return 0
    fi
    step "building the OCI images from busybox-static"
    rm -rf "$out"
    (cd "$ROOT" && "$VENV/bin/python" -m tests.e2e.harness.images "$out") \
        || die "could not build the OCI images"
    echo "$stamp" >"$out/stamp"
}

# bcc for the eBPF run-queue latency collector (koordlet/inspect). The headers are Debian's
# newest, not necessarily the running kernel's: the program reads only tracepoint arguments
# and uses BPF helpers, which do not depend on them.
setup_bcc() {
    apt_install python3-bpfcc linux-headers-amd64
    local kernel modules headers common
    kernel=$(uname -r)
    modules="/lib/modules/$kernel"
    if [ ! -e "$modules/build" ]; then
        headers=$(ls -d /usr/src/linux-headers-*-amd64 2>/dev/null | sort -V | tail -n1)
        common=$(ls -d /usr/src/linux-headers-*-common 2>/dev/null | sort -V | tail -n1)
        [ -n "$headers" ] || die "linux-headers-amd64 installed no /usr/src/linux-headers-*-amd64"
        step "linking $modules/build to $headers (no headers for kernel $kernel)"
        mkdir -p "$modules"
        ln -sfn "$headers" "$modules/build"
        [ -n "$common" ] && ln -sfn "$common" "$modules/source"
    fi
    if [ ! -e /sys/kernel/tracing/events/sched ] && [ ! -e /sys/kernel/debug/tracing/events/sched ]; then
        step "mounting tracefs at /sys/kernel/tracing"
        mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null \
            || die "cannot mount tracefs at /sys/kernel/tracing (the kernel needs CONFIG_TRACING)"
    fi
    # bcc's Python module is plain Python over libbcc: a .pth file gives .venv just that module,
    # not the rest of Debian's dist-packages.
    local module=/usr/lib/python3/dist-packages/bcc site
    [ -d "$module" ] || die "python3-bpfcc installed no $module"
    mkdir -p "$CACHE/bcc-python"
    ln -sfn "$module" "$CACHE/bcc-python/bcc"
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    echo "$CACHE/bcc-python" >"$site/koord-bcc.pth"
}

# The koordlet image the chart runs, built from the project's Containerfile with podman in a
# private store (.cache/podman: the machine's own container storage is never touched). No
# registry answers here, so its base is made locally: Debian bookworm from the machine's mirror
# (mmdebstrap) with python3 3.11 and pip and without the EXTERNALLY-MANAGED marker, which is
# what python:3.11-slim-bookworm offers the Containerfile. The build reaches the Debian mirror
# (apt-get) and PyPI (pip) through the host's network, trusting the host's CA bundle (mounted
# for the build only, never stored in the image). Saved as .cache/images/koordlet.tar (an OCI
# archive named as the chart's default image resolves: docker.io/koordinator-py/koordlet:TAG).
IMAGE_BASE=localhost/koordinator-py/python:3.11-bookworm
build_koordlet_image() {
    apt_install podman mmdebstrap
    local dir="$CACHE/image" out="$CACHE/images/koordlet.tar" tag image stamp want
    tag=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$ROOT/charts/koordinator-py/Chart.yaml")
    [ -n "$tag" ] || die "no appVersion in charts/koordinator-py/Chart.yaml"
    image="docker.io/koordinator-py/koordlet:$tag"
    local podman=(podman --root "$CACHE/podman/root" --runroot "$CACHE/podman/run" --storage-driver overlay)
    mkdir -p "$dir" "$CACHE/images"
    if [ ! -f "$dir/base.stamp" ] || ! "${podman[@]}" image exists "$IMAGE_BASE"; then
        step "making the image's Debian base $IMAGE_BASE with mmdebstrap"
        mmdebstrap --quiet --variant=minbase --include=python3,python3-pip,ca-certificates \
            --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
            --dpkgopt='path-exclude=/usr/share/locale/*' \
            --customize-hook='rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED' \
            bookworm "$dir/base.tar" "$(debian_mirror)" >"$dir/mmdebstrap.log" 2>&1 \
            || die "mmdebstrap could not make the image's base, see $dir/mmdebstrap.log"
        "${podman[@]}" import --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
            "$dir/base.tar" "$IMAGE_BASE" >/dev/null 2>&1 || die "podman import of $dir/base.tar failed"
        rm -f "$dir/base.tar"
        date -u +%FT%TZ >"$dir/base.stamp"
    fi
    # The image changes with its build inputs: the Containerfile, .dockerignore and what it copies.
    want=$(cd "$ROOT" && { cat "$dir/base.stamp"; echo "$image";
        find Containerfile .dockerignore pyproject.toml README.md LICENSE koordapi koordkube \
            nri_plugin runtimehooks koordlet manager scheduler descheduler -type f ! -path '*/__pycache__/*' \
            -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -d' ' -f1)
    if [ -f "$out" ] && [ -f "$dir/image.stamp" ] && [ "$(cat "$dir/image.stamp")" = "$want" ]; then
        return 0
    fi
    step "building the koordlet image $image from the Containerfile (podman)"
    (cd "$ROOT" && "${podman[@]}" build --pull=never --network host \
        --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
        --build-arg "BASE_IMAGE=$IMAGE_BASE" -f Containerfile -t "$image" .) >"$dir/build.log" 2>&1 \
        || die "podman build of the Containerfile failed, see $dir/build.log"
    rm -f "$out"
    "${podman[@]}" save --format oci-archive -o "$out" "$image" >/dev/null 2>&1 \
        || die "podman save of $image failed"
    "${podman[@]}" image prune --force >/dev/null 2>&1 || true
    local size layers
    size=$("${podman[@]}" image inspect --format '{{.Size}}' "$image")
    layers=$("${podman[@]}" image inspect --format '{{len .RootFS.Layers}}' "$image")
    step "image $image: $((size / 1000000)) MB in $layers layers, saved as $out ($(($(stat -c %s "$out") / 1000000)) MB)"
    echo "$want" >"$dir/image.stamp"
}

check_machine
# containernetworking-plugins: the CNI bridge the chart's Deployment pods get (tests/e2e/harness/podnet.py)
apt_install runc busybox-static ca-certificates containernetworking-plugins
fetch_trixie_packages
fetch_containerd2
make_venv
install_helm_sdkpy
generate_cri_stubs
fetch_promtool
build_images
setup_bcc
build_koordlet_image
setup_vm
