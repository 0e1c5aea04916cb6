#!/bin/busybox sh
# PID 1 of the VM's initramfs (tests/e2e/harness/vm.py): make the host's filesystem the guest's
# root, read-only over 9p under a copy-on-write tmpfs overlay, mount the run folder read-write at
# its own path, and hand over to systemd, which starts koord-vm.target: the run service that
# executes RUN/guest.sh and powers the machine off when it ends.
# Kernel command-line words it reads: koord.run=DIR (the run folder), koord.modules=DIR (the
# kernel's modules on the host, linked as /lib/modules/$(uname -r) in the guest) and
# koord.cwd=DIR (the command's working folder).
/bin/busybox --install -s /bin
export PATH=/bin

fail() {
    echo "koord-vm: $*" >/dev/console
    poweroff -f
}

mount -t devtmpfs devtmpfs /dev
mount -t proc proc /proc
mount -t sysfs sysfs /sys
for module in netfs 9pnet 9pnet_virtio 9p overlay; do
    insmod "/lib/modules/$module.ko" || fail "cannot load $module"
done
RUN="" MODULES="" CWD=""
for word in $(cat /proc/cmdline); do
    case $word in
    koord.run=*) RUN=${word#koord.run=} ;;
    koord.modules=*) MODULES=${word#koord.modules=} ;;
    koord.cwd=*) CWD=${word#koord.cwd=} ;;
    esac
done
[ -n "$RUN" ] || fail "no koord.run= on the kernel command line"

# cache=loose: the host's files do not change while a run lasts, and caching their metadata
# makes Python's imports several times faster than uncached 9p.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host \
    || fail "cannot mount the host's root over 9p"
mount -t tmpfs -o mode=0755 tmpfs /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work overlay /newroot \
    || fail "cannot make the overlay root"
# containerd's overlayfs snapshots cannot have their upper directory on overlayfs: /tmp is a
# fresh tmpfs. A working folder under the host's /tmp (a CI clone there) is kept visible.
case $CWD in
/tmp/*)
    mkdir -p /keep
    mount --bind "/newroot$CWD" /keep
    mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
    mkdir -p "/newroot$CWD"
    mount --move /keep "/newroot$CWD"
    ;;
*) mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp ;;
esac
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=512000 run "/newroot$RUN" \
    || fail "cannot mount the run folder $RUN"
if [ -n "$MODULES" ]; then
    rm -rf "/newroot/lib/modules/$(uname -r)"
    mkdir -p /newroot/lib/modules
    ln -s "$MODULES" "/newroot/lib/modules/$(uname -r)"
fi
# The host may be a container; systemd would then ignore the kernel command line and behave as
# a container's init. This machine is not one.
rm -f /newroot/.dockerenv /newroot/run/.containerenv

units=/newroot/etc/systemd/system
mkdir -p "$units"
cat >"$units/koord-vm.target" <<EOF
[Unit]
Description=koord VM: run one command
Wants=koord-vm-run.service
AllowIsolate=yes
EOF
cat >"$units/koord-vm-run.service" <<EOF
[Unit]
Description=koord VM command
# After the early boot (sysinit.target, basic.target) as any service: started later, as a
# unit's dependency, its tmpfiles run would empty /tmp under the command.
SuccessAction=poweroff-force
FailureAction=poweroff-force

[Service]
Type=oneshot
ExecStart=/bin/bash $RUN/guest.sh
EOF
: >"/newroot$RUN/up"
umount /proc /sys
umount /dev 2>/dev/null || true
exec switch_root /newroot /lib/systemd/systemd --unit=koord-vm.target
