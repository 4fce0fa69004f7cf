"""The test control endpoints (/_faults, /_seed, /_retention, /_reset, /_requests)."""

import json

from fakegcs.base import Reply
from fakegcs.state import STATE


# --- control endpoints ------------------------------------------------------

FAULT_ACTIONS = ("status", "cut_after_bytes", "stall_seconds", "drop")


def control(method, path, body):
    if path == "/_faults" and method == "POST":
        spec = json.loads(body or b"{}")
        specs = spec if isinstance(spec, list) else [spec]
        for f in specs:
            actions = [a for a in FAULT_ACTIONS if f.get(a) not in (None, False)]
            if len(actions) != 1:
                return Reply.json({"error": "exactly one of %s" % (FAULT_ACTIONS,)}, 400)
            f = dict(f)
            f["count"] = int(f.get("count", 1))
            if f["count"] < 1:
                return Reply.json({"error": "count must be >= 1"}, 400)
        with STATE.lock:
            for f in specs:
                f = dict(f)
                f["count"] = int(f.get("count", 1))
                STATE.faults.append(f)
            pending = len(STATE.faults)
        return Reply.json({"ok": True, "pending": pending})
    if path == "/_faults" and method == "GET":
        with STATE.lock:
            return Reply.json(list(STATE.faults))
    if path == "/_seed" and method == "POST":
        # Many small objects at once, without a request each (benchmarks):
        # {"bucket": B, "prefix": P, "dirs": D, "files": F} makes
        # P + "dNNNNN/fNNNNN" for D directories of F files (D = 0: P +
        # "fNNNNN", F files directly under P); all hold SEED_DATA.
        spec = json.loads(body or b"{}")
        bucket, prefix = spec["bucket"], spec.get("prefix", "")
        dirs, files = int(spec.get("dirs", 0)), int(spec["files"])
        if dirs:
            names = ("%sd%05d/f%05d" % (prefix, d, f) for d in range(dirs) for f in range(files))
        else:
            names = ("%sf%05d" % (prefix, f) for f in range(files))
        with STATE.lock:
            STATE.objects.seed(bucket, names, STATE.new_generation)
            count = len(STATE.objects.seeded)
        return Reply.json({"ok": True, "seeded": count})
    if path == "/_retention" and method == "POST":
        spec = json.loads(body or b"{}")
        with STATE.lock:
            if spec.get("seconds") is None:
                STATE.retention.pop(spec["bucket"], None)
            else:
                STATE.retention[spec["bucket"]] = int(spec["seconds"])
        return Reply.json({"ok": True})
    if path == "/_reset" and method == "POST":
        with STATE.lock:
            STATE.reset()
        return Reply.json({"ok": True})
    if path == "/_requests" and method == "GET":
        with STATE.lock:
            return Reply.json(list(STATE.requests))
    if path == "/_requests/clear" and method == "POST":
        with STATE.lock:
            STATE.requests.clear()
        return Reply.json({"ok": True})
    return Reply.json({"error": "unknown control %s %s" % (method, path)}, 404)
