"""TensorBoard event files without the tensorboard package: TFRecord framing with CRC-32C checks, a minimal
protobuf reader, and scalar summaries (``simple_value`` and scalar tensors)."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from mixlaw.errors import InputError
from mixlaw.runs.io.names import _canonical_columns, _with_sources
from mixlaw.runs.io.text import _ROW
from mixlaw.runs.values import printable


def _event_files(p: Path) -> Iterator[Path]:
    if p.is_file():
        yield p
        return
    for f in sorted(p.rglob("*")):
        if f.is_file() and "tfevents" in f.name:
            yield f


def _tensorboard_frame(
    path: Path, *, allow_nan: bool, column_map: Mapping[str, str], drop: Sequence[str] = ()
) -> pd.DataFrame:
    files = list(_event_files(path))
    if not files:
        raise InputError(f"expected TensorBoard event files, got none in {path.name}")
    base = path if path.is_dir() else path.parent
    values: dict[tuple[str, int, str], float] = {}
    tags: list[str] = []
    for f in files:
        rel = f.parent.relative_to(base).as_posix()
        run = base.name if rel in (".", "") else rel
        if path.is_file():
            run = f.parent.name or f.stem
        for step, tag, value in _scalars_from_event_file(f):
            if math.isinf(value) or (not allow_nan and math.isnan(value)):
                what = "a finite number or NaN (--allow-nan admits NaN, not inf)" if allow_nan else "a finite number"
                raise InputError(f"expected {what}, got {value!r} at step {step} in {f.name}:{step}:{printable(tag)}")
            values[(run, step, tag)] = value
            if tag not in tags:
                tags.append(tag)
    if not values:
        raise InputError(f"expected scalar summaries, got none in {path.name}")
    mapping = _canonical_columns(tags, column_map, path.name, drop)
    if "run_id" in mapping.values():
        raise InputError(f"expected runs named by their directory, got a scalar mapped to run_id in {path.name}")
    recs: dict[tuple[str, int], dict[str, Any]] = {}
    for (run, step, tag), v in values.items():
        canon = mapping[tag]
        if canon is None or canon == "step":
            continue
        recs.setdefault((run, step), {"run_id": run, "step": step})[canon] = v
    keys = sorted(recs)
    cols = ["run_id", "step"] + sorted({c for r in recs.values() for c in r} - {"run_id", "step"})
    df = pd.DataFrame({c: pd.Series([recs[k].get(c) for k in keys], dtype=object) for c in cols})
    for c in cols[2:]:
        df[c] = pd.to_numeric(df[c])
    df[_ROW] = np.arange(1, len(df) + 1)
    return _with_sources(df, mapping)


def _crc32c_table() -> list[int]:
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _tfrecords(path: Path) -> Iterator[tuple[int, bytes]]:
    """(byte offset, payload) of each TFRecord; verifies length checksums (and payloads up to 1 MiB)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"expected a readable file, got '{exc.strerror or exc}' in {path.name}") from None
    pos, n = 0, len(data)
    if n == 0:
        raise InputError(f"expected a TensorBoard event file, got an empty file in {path.name}")
    while pos < n:
        if n - pos < 12:
            return  # truncated header of the last record: a writer was interrupted
        (length,) = struct.unpack_from("<Q", data, pos)
        (len_crc,) = struct.unpack_from("<I", data, pos + 8)
        if _masked_crc(data[pos : pos + 8]) != len_crc:
            raise InputError(
                f"expected a TensorBoard event file (TFRecord), got a bad checksum at byte {pos} in {path.name}"
            )
        start = pos + 12
        end = start + length
        if end + 4 > n:
            return  # truncated last record
        payload = data[start:end]
        (data_crc,) = struct.unpack_from("<I", data, end)
        if length <= (1 << 20) and _masked_crc(payload) != data_crc:
            raise InputError(f"expected an intact TensorBoard record, got a bad checksum at byte {pos} in {path.name}")
        yield pos, payload
        pos = end + 4


class _ProtoError(Exception):
    pass


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _ProtoError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) of a protobuf message; value is int, bytes or a raw 4/8-byte chunk."""
    pos, n = 0, len(buf)
    v: Any
    while pos < n:
        key, pos = _varint(buf, pos)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 1:
            if pos + 8 > n:
                raise _ProtoError("truncated 64-bit field")
            v, pos = buf[pos : pos + 8], pos + 8
        elif wt == 2:
            ln, pos = _varint(buf, pos)
            if pos + ln > n:
                raise _ProtoError("truncated length-delimited field")
            v, pos = buf[pos : pos + ln], pos + ln
        elif wt == 5:
            if pos + 4 > n:
                raise _ProtoError("truncated 32-bit field")
            v, pos = buf[pos : pos + 4], pos + 4
        else:
            raise _ProtoError(f"unsupported wire type {wt}")
        yield num, wt, v


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= (1 << 63) else v


def _tensor_scalar(buf: bytes) -> float | None:
    dtype, dims, content = 0, 0, None
    vals: list[float] = []
    for num, wt, v in _fields(buf):
        if num == 1 and wt == 0:
            dtype = v
        elif num == 2 and wt == 2:
            dims = sum(1 for n2, _, _ in _fields(v) if n2 == 2)
            for n2, _, dim in _fields(v):
                if n2 == 2:
                    for n3, _, size in _fields(dim):
                        if n3 == 1 and size != 1:
                            return None
        elif num == 4 and wt == 2:
            content = v
        elif num == 5:  # float_val
            vals += list(struct.unpack(f"<{len(v) // 4}f", v)) if wt in (2, 5) else []
        elif num == 6:  # double_val
            vals += list(struct.unpack(f"<{len(v) // 8}d", v)) if wt in (1, 2) else []
        elif num in (7, 10) and wt == 0:
            vals.append(float(_signed64(v)))
        elif num in (7, 10) and wt == 2:
            p = 0
            while p < len(v):
                x, p = _varint(v, p)
                vals.append(float(_signed64(x)))
    del dims
    if content is not None:
        fmt = {1: "f", 2: "d", 3: "i", 9: "q"}.get(dtype)
        if fmt is None:
            return None
        size = struct.calcsize(fmt)
        if len(content) != size:
            return None
        return float(struct.unpack("<" + fmt, content)[0])
    if len(vals) == 1:
        return float(vals[0])
    return None


def _scalars_from_event_file(path: Path) -> Iterator[tuple[int, str, float]]:
    for offset, payload in _tfrecords(path):
        try:
            step = 0
            summary: bytes | None = None
            for num, wt, v in _fields(payload):
                if num == 2 and wt == 0:
                    step = _signed64(v)
                elif num == 5 and wt == 2:
                    summary = v
            if summary is None:
                continue
            for num, wt, value in _fields(summary):
                if num != 1 or wt != 2:
                    continue
                tag, simple, tensor, plugin, data_class = None, None, None, None, 0
                for n2, w2, v2 in _fields(value):
                    if n2 == 1 and w2 == 2:
                        tag = v2.decode("utf-8", errors="replace")
                    elif n2 == 2 and w2 == 5:
                        simple = struct.unpack("<f", v2)[0]
                    elif n2 == 8 and w2 == 2:
                        tensor = v2
                    elif n2 == 9 and w2 == 2:
                        for n3, w3, v3 in _fields(v2):
                            if n3 == 1 and w3 == 2:
                                for n4, w4, v4 in _fields(v3):
                                    if n4 == 1 and w4 == 2:
                                        plugin = v4.decode("utf-8", errors="replace")
                            elif n3 == 4 and w3 == 0:
                                data_class = v3
                if tag is None:
                    continue
                if simple is not None:
                    yield step, tag, float(simple)
                elif tensor is not None and (plugin == "scalars" or data_class == 1):
                    x = _tensor_scalar(tensor)
                    if x is not None:
                        yield step, tag, x
        except (_ProtoError, struct.error) as exc:
            raise InputError(
                f"expected a TensorBoard event record, got {exc} at byte {offset} in {path.name}"
            ) from None
