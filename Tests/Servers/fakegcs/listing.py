"""The bucket resource and objects.list: paging, delimiters, offsets, fields."""

import base64
import bisect
import json

from fakegcs.base import Reply, bad_request
from fakegcs.state import STATE
from fakegcs.objects import check_bucket, q1, q_int


# --- GCS handlers -------------------------------------------------------------


def h_bucket_get(bucket, query):
    check_bucket(bucket)
    return Reply.json(
        {
            "kind": "storage#bucket",
            "id": bucket,
            "name": bucket,
            "location": "US",
            "storageClass": "STANDARD",
            "metageneration": "1",
            **(
                {"retentionPolicy": {"retentionPeriod": str(STATE.retention[bucket])}}
                if bucket in STATE.retention
                else {}
            ),
        }
    )


def _page_token(key, kind):
    raw = json.dumps([key, kind]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_page_token(token):
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        key, kind = json.loads(raw)
        return (str(key), int(kind))
    except Exception:
        raise bad_request("Invalid page token.")


def h_list(bucket, query):
    check_bucket(bucket)
    prefix = q1(query, "prefix", "")
    delimiter = q1(query, "delimiter", "")
    trailing = q1(query, "includeTrailingDelimiter", "false").lower() == "true"
    start_offset = q1(query, "startOffset")
    end_offset = q1(query, "endOffset")
    max_results = q_int(query, "maxResults")
    if max_results is None:
        max_results = 1000
    if max_results < 1:
        raise bad_request("Invalid value for maxResults: %d" % max_results)
    max_results = min(max_results, 1000)
    after = None
    token = q1(query, "pageToken")
    if token:
        after = _parse_page_token(token)

    names = STATE.objects.sorted_names(bucket)
    entries = _list_entries(
        names, prefix, delimiter, trailing, start_offset, end_offset, max_results + 1, after
    )
    page, more = entries[:max_results], len(entries) > max_results
    result = {"kind": "storage#objects"}
    items = [STATE.objects.resource(bucket, key) for key, kind in page if kind == 1]
    prefixes = [key for key, kind in page if kind == 0]
    if prefixes:
        result["prefixes"] = prefixes
    if items:
        result["items"] = items
    if more:
        result["nextPageToken"] = _page_token(*page[-1])
    fields = q1(query, "fields")
    if fields:
        result = _select_fields(result, _parse_fields(fields))
    return Reply.json(result)


def _parse_fields(spec):
    """GCS's partial-response syntax: ``a,b(c,d)`` gives
    ``{"a": None, "b": {"c": None, "d": None}}`` (None: the whole value)."""

    def parse(i):
        selected, name = {}, ""
        while i < len(spec):
            ch = spec[i]
            if ch == "(":
                selected[name.strip()], i = parse(i + 1)
                name = ""
                continue
            if ch in ",)":
                if name.strip():
                    selected[name.strip()] = None
                name = ""
                i += 1
                if ch == ")":
                    return selected, i
                continue
            name += ch
            i += 1
        if name.strip():
            selected[name.strip()] = None
        return selected, i

    return parse(0)[0]


def _select_fields(value, selected):
    """``value`` with only the ``selected`` fields (lists: of each element)."""
    if selected is None:
        return value
    if isinstance(value, list):
        return [_select_fields(v, selected) for v in value]
    if isinstance(value, dict):
        return {k: _select_fields(value[k], sub) for k, sub in selected.items() if k in value}
    return value


def _after_all_below(prefix):
    """The smallest string above every string that starts with ``prefix``."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


def _list_entries(names, prefix, delimiter, trailing, start_offset, end_offset, limit, after):
    """Up to ``limit`` listing entries ``(key, kind)`` (kind 0: a prefix, 1:
    an item) in GCS order, after the entry ``after``, from the sorted
    ``names``. Names below one prefix come one after another, so each
    prefix costs one binary search to skip what is below it."""
    lo = bisect.bisect_left(names, prefix)
    if start_offset is not None:
        lo = max(lo, bisect.bisect_left(names, start_offset))
    entries = []
    if after is not None:
        key, kind = after
        if delimiter and key.endswith(delimiter) and key.startswith(prefix) and len(key) > len(prefix):
            # a prefix (or its placeholder): everything below it was listed
            if kind == 0 and trailing:
                at = bisect.bisect_left(names, key)
                if at < len(names) and names[at] == key and lo <= at:
                    entries.append((key, 1))
            lo = max(lo, bisect.bisect_left(names, _after_all_below(key)))
        else:
            lo = max(lo, bisect.bisect_right(names, key))
    i = lo
    while i < len(names) and len(entries) < limit:
        name = names[i]
        if not name.startswith(prefix) or (end_offset is not None and name >= end_offset):
            break
        rest = name[len(prefix):]
        if delimiter and delimiter in rest:
            pfx = prefix + rest[: rest.index(delimiter) + len(delimiter)]
            entries.append((pfx, 0))
            if trailing and name == pfx:
                entries.append((name, 1))
            i = bisect.bisect_left(names, _after_all_below(pfx), i + 1)
            continue
        entries.append((name, 1))
        i += 1
    return entries[:limit]
