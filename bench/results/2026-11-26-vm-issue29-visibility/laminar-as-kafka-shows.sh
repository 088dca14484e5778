#!/bin/sh
# The same Laminar build with consumers shown what Kafka shows (not only what is on the disk):
# BASE_BIN for bench/s5.sh, so that BROKERS="base laminar" compares the two in one run.
exec "${LAMINAR_BIN:-target/release/laminar}" "$@" --set log.read.after.fsync=false
