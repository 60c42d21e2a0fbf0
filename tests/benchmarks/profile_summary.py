"""Summarise a py-spy profile in collapsed form (``py-spy record -f raw``), as
``legacy_load.py --profile DIR`` writes them::

    python tests/benchmarks/profile_summary.py /tmp/prof/legacy.txt [--top 25] [--match mcp_tasks]

Prints the frames with the most samples on the stack (inclusive) among those whose text
contains ``--match`` (all when empty), and the functions with the most samples of their own
(self time). Idle samples (the event loop waiting) are left out.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

#: A sample whose innermost frame is one of these is the loop waiting, not work.
IDLE = re.compile(r"\b(select|epoll_wait|poll|_run_once|run_forever|wait) \(")


def load(path: Path) -> list[tuple[list[str], int]]:
    samples = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            samples.append((stack.split(";"), int(count)))
    return samples


def short(frame: str) -> str:
    """``fn (path/to/module.py:12)`` → ``fn (module.py)``: lines apart, one function."""
    return re.sub(r"\(([^()]*/)?([^/():]+):\d+\)", r"(\2)", frame)


def summary(path: Path, top: int, match: str) -> list[str]:
    samples = [(stack, n) for stack, n in load(path) if not IDLE.search(stack[-1])]
    total = sum(n for _, n in samples)
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for stack, n in samples:
        for frame in {short(frame) for frame in stack}:
            if match in frame:
                inclusive[frame] += n
        own[short(stack[-1])] += n
    lines = [f"{path}: {total} busy samples", "", f"inclusive ({match or 'all'}):"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in inclusive.most_common(top)]
    lines += ["", "self:"]
    lines += [f"  {n / total:6.1%}  {frame}" for frame, n in own.most_common(top)]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--match", default="", help="inclusive: frames containing this only")
    args = parser.parse_args()
    print("\n".join(summary(args.profile, args.top, args.match)))


if __name__ == "__main__":
    main()
