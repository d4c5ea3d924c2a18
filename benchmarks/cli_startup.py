"""Wall-clock seconds of the ``avdgp`` commands that must answer at once, against a budget.

``avdgp --help``, ``avdgp fit --help`` and ``avdgp --version`` parse the command line only; they
must not load TensorFlow (issue 36: 11-14 s when the parser imported it). Each command runs
``--repeats`` times in a fresh process (the console script, as a user types it); the median is
compared with ``--budget`` seconds and the table appended to
``benchmarks/results/cli_startup/results.md``. Exit status 1 if a median exceeds the budget.

    python benchmarks/cli_startup.py            # 5 runs each, budget 1 s
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = (["--help"], ["fit", "--help"], ["predict", "--help"], ["--version"])
RESULTS = Path(__file__).parent / "results" / "cli_startup" / "results.md"


def seconds_of(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=float, default=1.0, help="seconds (default: 1)")
    args = parser.parse_args()
    script = shutil.which("avdgp") or str(Path(sys.executable).with_name("avdgp"))
    lines = [
        f"\n## {datetime.date.today()}: median of {args.repeats} fresh processes, budget "
        f"{args.budget:g} s\n",
        "| command | median s | max s | within budget |",
        "|---|---:|---:|---|",
    ]
    over = False
    for arguments in COMMANDS:
        times = [seconds_of([script, *arguments]) for _ in range(args.repeats)]
        median = statistics.median(times)
        over |= median > args.budget
        lines.append(
            f"| `avdgp {' '.join(arguments)}` | {median:.2f} | {max(times):.2f} | "
            f"{'yes' if median <= args.budget else 'NO'} |"
        )
    print("\n".join(lines))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    with RESULTS.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
