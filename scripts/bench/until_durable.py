#!/usr/bin/env python3
"""Times a write workload until its result is durable in the bucket.

    until_durable.py BASE BUCKET CHECK [--wait] [--deadline S] [--stdout FILE] -- CMD...

Runs CMD (it must exit 0), then asks the JSON API whether CHECK holds:

    object NAME LOCAL           the object NAME exists with LOCAL's size
    objects PREFIX COUNT LOCAL  COUNT objects under PREFIX (not counting
                                `dir/` placeholders) exist, each with LOCAL's
                                size
    none PREFIX                 no object at all is left under PREFIX

Without --wait, CHECK must hold at the first look after CMD returned, and the
time reported is CMD's. With --wait the API is polled (the first look at
once, then every 50 ms for one object, every 100 ms for a listing) until
CHECK holds or S seconds (default 120) have passed since CMD started, and
the time reported is from CMD's start until the look that saw it hold; this
is "durable" for a mount that uploads after close returned.

After the timing, objects that passed are also compared with LOCAL's MD5
(the emulator's md5Hash); a mismatch fails.

Prints one line on stdout: TOTAL_SECONDS CMD_SECONDS LOOKS (the number of
API looks, 1 if CHECK held as soon as CMD returned); details go to stderr.
The timer starts right before CMD is started and stops right after the
look that succeeded, so Python's own start-up is not in it.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def get_json(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


class Bucket:
    def __init__(self, base, bucket):
        self.api = f"{base}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o"

    def object(self, name):
        """The object's metadata, or None if it does not exist (yet)."""
        try:
            return get_json(f"{self.api}/{urllib.parse.quote(name, safe='')}")
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def listing(self, prefix):
        """Every object under prefix, over all pages."""
        items, token = [], None
        while True:
            query = {"prefix": prefix}
            if token:
                query["pageToken"] = token
            page = get_json(f"{self.api}?{urllib.parse.urlencode(query)}")
            items.extend(page.get("items", []))
            token = page.get("nextPageToken")
            if not token:
                return items


def md5_b64(path):
    digest = hashlib.md5()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return base64.b64encode(digest.digest()).decode()


class Check:
    """CHECK from the command line: look() says whether it holds now."""

    def __init__(self, bucket, words):
        self.bucket = bucket
        self.kind = words[0]
        self.passed = []  # metadata of the objects that passed the last look
        if self.kind == "object" and len(words) == 3:
            self.name, self.local = words[1], words[2]
            self.interval = 0.05
        elif self.kind == "objects" and len(words) == 4:
            self.prefix, self.count, self.local = words[1], int(words[2]), words[3]
            self.interval = 0.1
        elif self.kind == "none" and len(words) == 2:
            self.prefix, self.local = words[1], None
            self.interval = 0.1
        else:
            raise SystemExit(__doc__)
        self.size = os.path.getsize(self.local) if self.local else None
        self.state = ""

    def look(self):
        if self.kind == "object":
            meta = self.bucket.object(self.name)
            self.state = "missing" if meta is None else f"size {meta.get('size')}"
            self.passed = [meta] if meta is not None and int(meta["size"]) == self.size else []
            return bool(self.passed)
        items = self.bucket.listing(self.prefix)
        if self.kind == "none":
            self.state = f"{len(items)} objects left"
            return not items
        files = [i for i in items if not i["name"].endswith("/")]
        full = [i for i in files if int(i["size"]) == self.size]
        self.state = f"{len(files)} objects, {len(full)} of {self.size} bytes"
        self.passed = full if len(files) == self.count and len(full) == self.count else []
        return bool(self.passed)

    def verify_content(self):
        if not self.passed:
            return
        want = md5_b64(self.local)
        wrong = [m["name"] for m in self.passed if m.get("md5Hash") != want]
        if wrong:
            raise SystemExit(f"until_durable: {len(wrong)} object(s) with the wrong MD5, e.g. {wrong[0]}")


def parse(argv):
    if "--" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    words, cmd = argv[1:split], argv[split + 1:]
    opts = {"wait": False, "deadline": 120.0, "stdout": None}
    rest = []
    i = 0
    while i < len(words):
        if words[i] == "--wait":
            opts["wait"] = True
        elif words[i] in ("--deadline", "--stdout") and i + 1 < len(words):
            value = words[i + 1]
            opts[words[i][2:]] = float(value) if words[i] == "--deadline" else value
            i += 1
        else:
            rest.append(words[i])
        i += 1
    if len(rest) < 3 or not cmd:
        raise SystemExit(__doc__)
    return rest[0], rest[1], rest[2:], cmd, opts


def main(argv):
    base, bucket_name, check_words, cmd, opts = parse(argv)
    check = Check(Bucket(base, bucket_name), check_words)
    out = open(opts["stdout"], "wb") if opts["stdout"] else subprocess.DEVNULL
    start = time.perf_counter()
    result = subprocess.run(cmd, stdout=out)
    returned = time.perf_counter()
    if result.returncode != 0:
        raise SystemExit(f"until_durable: {cmd[0]} exited {result.returncode}")
    looks = 0
    while True:
        looks += 1
        held = check.look()
        seen = time.perf_counter()
        if held:
            break
        if not opts["wait"]:
            raise SystemExit(f"until_durable: {check.kind} check failed when {cmd[0]} returned: {check.state}")
        if seen - start > opts["deadline"]:
            raise SystemExit(f"until_durable: not durable {opts['deadline']:.0f} s after the start: {check.state}")
        time.sleep(check.interval)
    check.verify_content()
    total = (seen if opts["wait"] else returned) - start
    print(f"until_durable: {cmd[0]} returned after {returned - start:.3f} s; "
          f"{check.kind} check held at look {looks}, {seen - start:.3f} s after the start ({check.state})",
          file=sys.stderr)
    print(f"{total:.3f} {returned - start:.3f} {looks}")


if __name__ == "__main__":
    main(sys.argv)
