"""Where a bench run's raw files go: the rule of bench_raw_dir in bench/machine.sh, for the
Python summaries: ${LAMINAR_BENCH_RAW:-/var/tmp/laminar-bench-raw}/ followed by OUT's path
under bench/results/ (OUT's own name when it is elsewhere)."""
import os

RESULTS = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))


def raw_dir(out):
    """The directory outside the repository that holds the raw files of the run in OUT."""
    root = os.environ.get("LAMINAR_BENCH_RAW") or "/var/tmp/laminar-bench-raw"
    path = os.path.realpath(out)
    if path.startswith(RESULTS + os.sep):
        return os.path.join(root, os.path.relpath(path, RESULTS))
    return os.path.join(root, os.path.basename(path))
