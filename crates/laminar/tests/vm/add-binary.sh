#!/bin/bash
# add-binary.sh ROOTDIR BINARY [DEST]
# Copy a (possibly dynamically linked) host binary into ROOTDIR at DEST (default: same
# absolute path), plus every library ldd lists and the dynamic loader, at the same paths.
set -euo pipefail
root=$1; bin=$(readlink -f "$2"); dest=${3:-$bin}
cp_path() { # copy host file $1 to $root$1 (keeping symlink names resolvable)
  local p=$1
  mkdir -p "$root$(dirname "$p")"
  cp -L "$p" "$root$p"
}
mkdir -p "$root$(dirname "$dest")"; cp -L "$bin" "$root$dest"; chmod +x "$root$dest"
if ldd "$bin" >/dev/null 2>&1; then
  ldd "$bin" | awk '/=> \//{print $3} /^\s*\//{print $1}' | sort -u | while read -r lib; do
    cp_path "$lib"
    # also the canonical path if lib is reached through a symlink (e.g. /lib -> usr/lib)
    real=$(readlink -f "$lib"); [ "$real" = "$lib" ] || cp_path "$real"
  done
  for ld in /lib64/ld-linux-x86-64.so.2; do [ -e "$ld" ] && cp_path "$ld"; done
fi
