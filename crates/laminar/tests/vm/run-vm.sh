#!/usr/bin/env bash
# run-vm.sh [options] PROGRAM [ARGS...]: boots the kernel setup.sh fetched into $KTLS_VM_DIR
# under qemu (software emulation: no KVM needed) with a busybox initramfs that loads its
# modules (tls among them), runs PROGRAM ARGS as root, and powers off.
#   --forward HOSTPORT:GUESTPORT  qemu user networking forwards 127.0.0.1:HOSTPORT (repeatable)
#   --file SRC[:DST]              a host file in the guest (an ELF with its libraries)
#   --disk IMAGE                  a virtio disk (/dev/vda; init mounts an ext4 one on /data)
#   --timeout SECS (600)  --mem MB (1024)  --smp N (2)  --log FILE (the console; without it,
#                                 printed when the VM ends)
# Exit status: PROGRAM's (the KTLSVM_EXIT= console line); 124 on timeout, 125 if the VM
# ended without one. Stopped by a signal, it stops qemu.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
vm="${KTLS_VM_DIR:?KTLS_VM_DIR: the directory setup.sh filled}"
kver="$(cat "$vm/kver")"
busybox="$vm/bb/bin/busybox"
fwds=() files=() disk="" timeout_s=600 mem=1024 smp=2 log=""
while [ $# -gt 0 ]; do
  case $1 in
    --forward) fwds+=("$2"); shift 2 ;;
    --file) files+=("$2"); shift 2 ;;
    --disk) disk=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --smp) smp=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --) shift; break ;;
    -*) echo "run-vm.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { echo "usage: run-vm.sh [options] PROGRAM [ARGS...]" >&2; exit 2; }
prog="$(readlink -f "$1")"; shift

work="$(mktemp -d "$vm/run.XXXXXX")"
qpid=""
cleanup() {
  if [ -n "$qpid" ]; then kill -TERM "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
root="$work/root"
mkdir -p "$root"/{proc,sys,dev,tmp,run,etc,root,data,usr/bin,usr/sbin,usr/lib,usr/lib64}
# The host's merged /usr, so that ldd's paths resolve the same way in the guest.
for d in bin sbin lib lib64; do
  if [ -L "/$d" ]; then ln -s "$(readlink "/$d")" "$root/$d"; else mkdir -p "$root/$d"; fi
done
cp "$busybox" "$root/bin/busybox"
for a in $("$busybox" --list); do [ -e "$root/bin/$a" ] || ln -s busybox "$root/bin/$a"; done
cp "$here/init" "$root/init" && chmod +x "$root/init"
: >"$root/etc/ktlsvm-modules.list"
while read -r m; do
  [ -n "$m" ] || continue
  mkdir -p "$root$(dirname "$m")" && cp "$vm/kernel$m" "$root$m"
  echo "$m" >>"$root/etc/ktlsvm-modules.list"
done <"$vm/modules.list"
echo "root:x:0:0:root:/root:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"
echo "127.0.0.1 localhost" >"$root/etc/hosts"
"$here/add-binary.sh" "$root" "$prog"
for f in "${files[@]}"; do
  src=${f%%:*} dst=${f#*:}
  [ "$dst" = "$f" ] && dst="$(readlink -f "$src")"
  if [ "$(head -c4 "$src" | tr -d '\0')" = $'\x7fELF' ]; then
    "$here/add-binary.sh" "$root" "$src" "$dst"
  else
    mkdir -p "$root$(dirname "$dst")" && cp -L "$src" "$root$dst"
  fi
done
quote() { printf "'%s'" "$(printf %s "$1" | sed "s/'/'\\\\''/g")"; }
{
  echo "#!/bin/sh"
  printf 'exec %s' "$(quote "$prog")"
  for a in "$@"; do printf ' %s' "$(quote "$a")"; done
  echo
} >"$root/run.sh"
(cd "$root" && find . | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -1 >"$work/initrd.gz"

nic="user,id=n0"
for f in "${fwds[@]}"; do nic+=",hostfwd=tcp:127.0.0.1:${f%%:*}-:${f#*:}"; done
drive=()
[ -n "$disk" ] && drive=(-drive "file=$disk,format=raw,if=virtio,cache=none")
out="${log:-$work/console.log}"
# `timeout` passes a TERM on to qemu (a KILL it could not): stopping this script stops qemu.
timeout -s KILL "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -smp "$smp" -m "$mem" \
  -kernel "$vm/kernel/boot/vmlinuz-$kver" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet loglevel=3 rdinit=/init" \
  -netdev "$nic" -device virtio-net-pci,netdev=n0,romfile= "${drive[@]}" \
  -nographic -no-reboot </dev/null >"$out" 2>&1 &
qpid=$!
set +e
wait "$qpid"
qrc=$?
set -e
qpid=""
[ -n "$log" ] || cat "$out"
rc="$(tr -d '\r' <"$out" | sed -n 's/^KTLSVM_EXIT=\([0-9]*\)$/\1/p' | tail -1)"
[ -n "$rc" ] && exit "$rc"
[ "$qrc" = 137 ] && exit 124
exit 125
