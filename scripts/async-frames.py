#!/usr/bin/env python3
"""The async frame size of each Swift async function in a binary, or how they changed between two.

A Swift task keeps the frames of its deepest call (task-allocator slabs) until it ends, and a
request waiting for the database holds every frame of its chain: a frame that grows by a kilobyte
costs a megabyte per thousand requests in flight (docs/architecture.md, "The fast path"). Each
async function has an async function pointer (its symbol ends in `Tu`): a 32-bit relative offset
to the function, then the 32-bit size of the frame it allocates.

usage: scripts/async-frames.py BINARY [BASELINE] [--grep REGEX] [--top N]
  BINARY alone      the largest frames, biggest first
  BINARY BASELINE   the frames that changed between BASELINE and BINARY, most grown first
  --grep REGEX      only functions whose demangled name matches (e.g. 'Middleware|chatTurn')
  --top N           at most N lines (40)
Reads the binary with binutils' readelf and nm, and demangles with `swift demangle`. Compare
release builds (`swift build -c release`): debug frames say little about what runs.
"""

import argparse
import re
import struct
import subprocess
import sys


def sections(path):
    """(address, file offset, size) of each allocated section with file contents."""
    out = subprocess.run(["readelf", "-SW", path], capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        match = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+(\S+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if match and match.group(2) != "NOBITS":
            found.append((int(match.group(3), 16), int(match.group(4), 16), int(match.group(5), 16)))
    return found


def frame_sizes(path):
    """Mangled name -> frame size, for every async function pointer the binary defines."""
    places = sections(path)
    with open(path, "rb") as binary:
        data = binary.read()
    symbols = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in symbols.splitlines():
        parts = line.split()
        if len(parts) != 3 or not parts[2].endswith("Tu"):
            continue
        address = int(parts[0], 16)
        for start, offset, size in places:
            if start <= address < start + size:
                at = offset + address - start
                sizes[parts[2]] = struct.unpack_from("<iI", data, at)[1]
                break
    return sizes


def demangled(names):
    """Mangled -> demangled (simplified), in one `swift demangle` call."""
    out = subprocess.run(
        ["swift", "demangle", "--simplified", "--compact"], input="\n".join(names), capture_output=True, text=True, check=True
    ).stdout.splitlines()
    return dict(zip(names, (name.removeprefix("async function pointer to ") for name in out)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("baseline", nargs="?")
    parser.add_argument("--grep")
    parser.add_argument("--top", type=int, default=40)
    arguments = parser.parse_args()

    sizes = frame_sizes(arguments.binary)
    if arguments.baseline:
        before = frame_sizes(arguments.baseline)
        rows = [(sizes[name] - before[name], sizes[name], before[name], name) for name in sizes.keys() & before.keys()]
        rows = [row for row in rows if row[0] != 0]
        print(f"{len(rows)} of {len(sizes.keys() & before.keys())} frames in both changed; "
              f"{len(sizes.keys() - before.keys())} new, {len(before.keys() - sizes.keys())} gone")
        header = f"{'change':>7} {'now':>6} {'before':>6}  function"
    else:
        rows = [(size, size, None, name) for name, size in sizes.items()]
        header = f"{'bytes':>7}  function"
    names = demangled([row[3] for row in rows])
    if arguments.grep:
        pattern = re.compile(arguments.grep)
        rows = [row for row in rows if pattern.search(names[row[3]])]
    rows.sort(key=lambda row: row[0], reverse=True)
    print(header)
    for change, now, before, name in rows[: arguments.top]:
        if before is None:
            print(f"{now:>7}  {names[name][:160]}")
        else:
            print(f"{change:>+7} {now:>6} {before:>6}  {names[name][:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
