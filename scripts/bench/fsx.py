#!/usr/bin/env python3
"""fsx-style random I/O on one file, checked against a model in memory.

usage: fsx.py PATH --ops N --seed S [--max-size BYTES]

Each op is one of: write at a random offset (possibly past the end), read a
random range and compare with the model, truncate to a random size, or
close and reopen (which flushes the file: on a bucket mount, an upload).
Every read is compared byte for byte; the final file is read whole and
compared. Exits 1 with the first difference, 0 when all agree. Used by
scripts/soak.sh, where it runs against bucketfs and rclone mounts alike.
"""
import argparse
import os
import random
import sys


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-size", type=int, default=256 * 1024)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    model = bytearray()
    fd = os.open(args.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for op in range(args.ops):
            kind = rng.choices(["write", "read", "truncate", "reopen"], weights=[45, 35, 10, 10])[0]
            if kind == "write":
                offset = rng.randrange(0, args.max_size)
                data = rng.randbytes(rng.randrange(1, 16 * 1024))
                data = data[: max(0, args.max_size - offset)] or b"x"
                os.pwrite(fd, data, offset)
                if len(model) < offset:
                    model.extend(b"\0" * (offset - len(model)))
                model[offset : offset + len(data)] = data
            elif kind == "read":
                if not model:
                    continue
                offset = rng.randrange(0, len(model))
                count = rng.randrange(1, 32 * 1024)
                got = os.pread(fd, count, offset)
                want = bytes(model[offset : offset + count])
                if got != want:
                    print(f"fsx: op {op}: read {count} at {offset}: {len(got)} bytes differ from the model's {len(want)}", file=sys.stderr)
                    return 1
            elif kind == "truncate":
                size = rng.randrange(0, args.max_size)
                os.ftruncate(fd, size)
                if size < len(model):
                    del model[size:]
                else:
                    model.extend(b"\0" * (size - len(model)))
            else:
                os.close(fd)
                fd = os.open(args.path, os.O_RDWR)
        os.close(fd)
        fd = -1
        with open(args.path, "rb") as f:
            whole = f.read()
        if whole != bytes(model):
            print(f"fsx: the file ({len(whole)} bytes) differs from the model ({len(model)} bytes)", file=sys.stderr)
            return 1
        return 0
    finally:
        if fd >= 0:
            os.close(fd)


if __name__ == "__main__":
    sys.exit(main())
