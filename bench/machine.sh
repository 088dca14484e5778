# shellcheck shell=bash
# Sourced by the bench scripts: `machine_info DIR` prints the machine, the disk under DIR and
# the laminar build, the header of every results/*/machine.txt.
machine_info() {
  echo "date: $(date -Is)"
  echo "host: $(hostname)"
  echo "kernel: $(uname -r)"
  echo "cpus: $(nproc) ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs))"
  echo "memory: $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "filesystem: $(df -T "$1" | awk 'NR==2 {print $1, $2}')"
  echo "laminar: $(target/release/laminar --version) at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "rustc: $(rustc --version)"
}
