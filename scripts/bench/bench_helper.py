#!/usr/bin/env python3
"""Helpers for scripts/bench.sh (no third-party imports).

  bench_helper.py gen-big PATH MIB SEED
      writes MIB MiB of deterministic pseudo-random bytes (random.Random(SEED))
  bench_helper.py offsets SIZE COUNT BLOCK SEED
      prints COUNT block-aligned offsets in [0, SIZE - BLOCK], one a line
  bench_helper.py gen-text PATH SIZE
      writes SIZE bytes of deterministic printable text that does not end in
      a newline (so a shell variable holds it exactly)
  bench_helper.py upload-config BASE BUCKET KIND...
      prints a curl --config that uploads the small objects (one curl process,
      one kept-alive connection); KIND is dir2000, tree, treedu (the same
      shape as tree), stat, rmtree:PREFIX
      (PREFIX/dNN/fNNN.txt, 10 directories of 100 files) or files:PREFIX:COUNT
      (PREFIXf000 ... : the names files-config uploads)
  bench_helper.py delete-config BASE BUCKET KIND...
      prints a curl --config with one DELETE per object of the KINDs
  bench_helper.py files-config BASE BUCKET PREFIX COUNT FILE
      prints a curl --config with COUNT media uploads of FILE, named
      PREFIXfNNN (the names the mount workload creates)
  bench_helper.py range-config URL OFFSETS_FILE BLOCK
      prints a curl --config with one ranged GET per offset
  bench_helper.py randread FILE OFFSETS_FILE BLOCK [--verify LOCAL] [--deadline S]
      os.pread()s BLOCK bytes at each offset of one open file; prints IOPS
      (time of the pread loop only); with --verify compares every block with
      LOCAL afterwards (outside the timing) and fails on a mismatch; with
      --deadline stops after S seconds and adds "(N of M reads in S s)"
  bench_helper.py statloop PATH COUNT
      os.stat()s PATH COUNT times; prints stat() calls per second
  bench_helper.py count-items FILE...
      prints the number of items over the given JSON listing pages
  bench_helper.py pwrite-new PATH MIB
      writes MIB MiB into a new file at PATH in 1 MiB os.pwrite()s, then
      deletes it; prints the seconds the writes took (what putting that many
      bytes into new pages of the page cache costs at that moment)
  bench_helper.py touch-memory GIB
      fills GIB GiB of new anonymous memory and frees it (exits); prints the
      seconds the fill took. On a guest whose host takes back the pages it
      reports free (virtio-balloon free page reporting), the next GIB GiB
      the kernel hands out are then pages touched a moment ago, whatever ran
      before: the bench runs it before a timing that allocates that much
  bench_helper.py round-trips RTT_MS START END LOG...
      prints how many round trips the delay proxies (scripts/bench/
      delay_proxy.py --log) saw a workload wait for between Unix times START
      and END: request starts and connection openings, grouped when less
      than half a round trip apart (what went out together)
"""

import hashlib
import json
import os
import random
import sys
import time
import urllib.parse

DIR2000_COUNT = 2000
TREE_SHAPE = (10, 10, 10)  # tree/dA/eB/fC.txt: 1,000 files, 111 directories
RMTREE_SHAPE = (10, 100)  # PREFIX/dNN/fNNN.txt: 1,000 files, 11 directories


def small_object_names(kind):
    if kind == "dir2000":
        return [f"dir2000/file-{i:04d}.txt" for i in range(DIR2000_COUNT)]
    if kind in ("tree", "treedu"):
        a, b, c = TREE_SHAPE
        return [f"{kind}/d{i}/e{j}/f{k}.txt" for i in range(a) for j in range(b) for k in range(c)]
    if kind == "stat":
        return ["stat/one.txt"]
    if kind.startswith("files:"):
        _, prefix, count = kind.split(":")
        return [f"{prefix}f{i:03d}" for i in range(int(count))]
    if kind.startswith("rmtree:"):
        prefix = kind[len("rmtree:"):]
        dirs, files = RMTREE_SHAPE
        return [f"{prefix}/d{i:02d}/f{j:03d}.txt" for i in range(dirs) for j in range(files)]
    raise SystemExit(f"unknown kind {kind}")


def curl_quote(text):
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"' + escaped + '"'


def gen_big(path, mib, seed):
    rng = random.Random(int(seed))
    with open(path, "wb") as f:
        for _ in range(int(mib)):
            f.write(rng.randbytes(1 << 20))


def gen_text(path, size):
    size = int(size)
    rng = random.Random(size)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    chars = [("\n" if i % 64 == 63 else rng.choice(alphabet)) for i in range(size)]
    chars[-1] = "."
    with open(path, "w") as f:
        f.write("".join(chars))


def offsets(size, count, block, seed):
    size, count, block = int(size), int(count), int(block)
    rng = random.Random(int(seed))
    slots = (size - block) // block + 1
    for _ in range(count):
        print(rng.randrange(slots) * block)


def upload_config(base, bucket, kinds):
    entries = []
    for kind in kinds:
        for name in small_object_names(kind):
            url = (f"{base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
                   + urllib.parse.quote(name, safe=""))
            body = f"bucketfs bench object {name}\n" + "x" * 200 + "\n"
            entries.append("\n".join([
                'request = "POST"',
                'header = "Content-Type: text/plain"',
                "data-binary = " + curl_quote(body),
                "url = " + curl_quote(url),
                'output = "/dev/null"',
                'write-out = "%{http_code}\\n"',
            ]))
    print("silent\nshow-error")
    print("\nnext\n".join(entries))


def delete_config(base, bucket, kinds):
    entries = []
    for kind in kinds:
        for name in small_object_names(kind):
            url = f"{base}/storage/v1/b/{bucket}/o/" + urllib.parse.quote(name, safe="")
            entries.append("\n".join([
                'request = "DELETE"',
                "url = " + curl_quote(url),
                'output = "/dev/null"',
                'write-out = "%{http_code}\\n"',
            ]))
    print("silent\nshow-error")
    print("\nnext\n".join(entries))


def files_config(base, bucket, prefix, count, path):
    entries = []
    for name in small_object_names(f"files:{prefix}:{count}"):
        url = (f"{base}/upload/storage/v1/b/{bucket}/o?uploadType=media&name="
               + urllib.parse.quote(name, safe=""))
        entries.append("\n".join([
            'request = "POST"',
            'header = "Content-Type: application/octet-stream"',
            "data-binary = " + curl_quote("@" + path),
            "url = " + curl_quote(url),
            'output = "/dev/null"',
            'write-out = "%{http_code}\\n"',
        ]))
    print("silent\nshow-error")
    print("\nnext\n".join(entries))


def range_config(url, offsets_file, block):
    block = int(block)
    entries = []
    with open(offsets_file) as f:
        for line in f:
            off = int(line)
            entries.append("\n".join([
                "url = " + curl_quote(url),
                f'range = "{off}-{off + block - 1}"',
                'output = "/dev/null"',
                'write-out = "%{http_code} %{size_download}\\n"',
            ]))
    print("silent\nshow-error")
    print("\nnext\n".join(entries))


def read_offsets(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]


def randread(path, offsets_file, block, verify=None, deadline=None):
    block = int(block)
    offs = read_offsets(offsets_file)
    total = len(offs)
    blocks = []
    fd = os.open(path, os.O_RDONLY)
    try:
        start = time.perf_counter()
        stop = start + float(deadline) if deadline else None
        for off in offs:
            blocks.append(os.pread(fd, block, off))
            if stop is not None and time.perf_counter() > stop:
                break
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
    offs = offs[:len(blocks)]
    short = sum(1 for b in blocks if len(b) != block)
    if short:
        raise SystemExit(f"randread: {short} short reads")
    if verify:
        with open(verify, "rb") as f:
            for off, got in zip(offs, blocks):
                f.seek(off)
                if f.read(block) != got:
                    raise SystemExit(f"randread: wrong bytes at offset {off}")
    iops = f"{len(offs) / elapsed:.0f}"
    if len(offs) < total:
        iops += f" ({len(offs)} of {total} reads in {elapsed:.0f} s)"
    print(iops)
    print(f"randread: {len(offs)} of {total} x {block} B in {elapsed:.3f} s", file=sys.stderr)


def statloop(path, count):
    count = int(count)
    os.stat(path)  # the first (lookup) is not what is measured
    stat = os.stat
    start = time.perf_counter()
    for _ in range(count):
        stat(path)
    elapsed = time.perf_counter() - start
    print(f"{count / elapsed:.0f}")
    print(f"statloop: {count} stat() in {elapsed:.3f} s", file=sys.stderr)


def count_items(files):
    total = 0
    for name in files:
        with open(name) as f:
            total += len(json.load(f).get("items", []))
    print(total)


def round_trips(rtt_ms, start, end, logs):
    rtt, start, end = float(rtt_ms) / 1000, float(start), float(end)
    times = []
    for log in logs:
        try:
            with open(log) as f:
                for line in f:
                    parts = line.split()
                    if len(parts) == 3 and parts[0] in ("OPEN", "REQ"):
                        t = float(parts[1])
                        if start <= t <= end:
                            times.append(t)
        except FileNotFoundError:
            pass
    groups, group_start = 0, None
    for t in sorted(times):
        if group_start is None or t - group_start >= rtt / 2:
            groups += 1
            group_start = t
    print(groups)


def pwrite_new(path, mib):
    piece = bytes(range(256)) * 4096
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.monotonic()
        for i in range(int(mib)):
            if os.pwrite(fd, piece, i << 20) != len(piece):
                raise SystemExit("pwrite-new: short write")
        elapsed = time.monotonic() - start
    finally:
        os.close(fd)
        os.unlink(path)
    print(f"{elapsed:.3f}")


def touch_memory(gib):
    start = time.monotonic()
    filled = b"\x01" * (int(gib) << 30)  # one memset: every page written
    elapsed = time.monotonic() - start
    del filled
    print(f"{elapsed:.3f}")


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    cmd, args = argv[1], argv[2:]
    if cmd == "gen-big":
        gen_big(*args)
    elif cmd == "gen-text":
        gen_text(*args)
    elif cmd == "offsets":
        offsets(*args)
    elif cmd == "upload-config":
        upload_config(args[0], args[1], args[2:])
    elif cmd == "delete-config":
        delete_config(args[0], args[1], args[2:])
    elif cmd == "files-config":
        files_config(*args)
    elif cmd == "range-config":
        range_config(*args)
    elif cmd == "randread":
        opts = {}
        for flag in ("--verify", "--deadline"):
            if flag in args:
                i = args.index(flag)
                opts[flag[2:]] = args[i + 1]
                args = args[:i] + args[i + 2:]
        randread(*args, **opts)
    elif cmd == "statloop":
        statloop(*args)
    elif cmd == "count-items":
        count_items(args)
    elif cmd == "pwrite-new":
        pwrite_new(*args)
    elif cmd == "touch-memory":
        touch_memory(*args)
    elif cmd == "round-trips":
        round_trips(args[0], args[1], args[2], args[3:])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
