#!/usr/bin/env bash
# setup.sh DIR: what run-vm.sh boots, fetched into DIR once: Debian's cloud kernel (built with
# CONFIG_TLS=m, which this machine's kernel lacks) and a static busybox, unpacked from their
# packages (`apt-get download`, not installed), and the list of modules to load, in order:
# virtio's network and block drivers, tls and the ciphers the kernel's TLS uses.
# Needs apt (Debian's package index), dpkg-deb and kmod's depmod/modprobe on the host.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
dir="${1:?usage: setup.sh DIR}"
mkdir -p "$dir" && cd "$dir"
[[ -s modules.list && -s kver ]] && exit 0
pkg="$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"
[[ -n "$pkg" ]] || { apt-get update -qq && pkg="$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')"; }
kver="${pkg#linux-image-}"
rm -rf debs kernel bb && mkdir -p debs kernel bb
(cd debs && apt-get download "$pkg" busybox-static >/dev/null)
dpkg-deb -x debs/"$pkg"_*.deb kernel
dpkg-deb -x debs/busybox-static_*.deb bb
depmod -b "$PWD/kernel" "$kver"
for m in virtio_pci virtio_net virtio_blk tls gcm ghash_generic ghash_clmulni_intel ctr aesni_intel \
  chacha20poly1305 chacha_x86_64 poly1305_x86_64 chacha_generic poly1305_generic seqiv; do
  modprobe -d "$PWD/kernel" -S "$kver" --show-depends "$m"
done | awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++' | sed "s|^$PWD/kernel||" >modules.list.new
mv modules.list.new modules.list
echo "$kver" >kver
echo "setup.sh: $kver, $(wc -l <modules.list) modules"
