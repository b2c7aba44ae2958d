"""The control nodes' per-message wire format: ``sensor_msgs/JointState`` read from, and
``std_msgs/Float64MultiArray`` written to, serialized CDR bytes.

Why: at 1 kHz the largest per-message cost of a Python node is not its own work but rclpy turning every
message into Python objects and back (for a 7-joint ``JointState``: a ``JointState``, a ``Header``, a
``Time``, 7 ``str`` and 3 ``array.array``, each through its checked ``__init__``; ≈ 23 µs warm, more in a
cold cache). A subscription created with ``raw=True`` hands the callback the serialized bytes instead, and
``Publisher.publish(bytes)`` sends bytes as they are. This module reads exactly the fields the nodes use
with :mod:`struct` (≈ 3 µs) and writes the command into a preallocated buffer (≈ 1 µs).

Format: OMG DDS-XTypes 1.3 §7.4.3 "XCDR version 1" (plain CDR), which ``rmw_fastrtps`` uses for ROS 2
messages: a 4-byte encapsulation header (``00 01`` = CDR little-endian, options ``00 00``) followed by the
fields in declaration order, each primitive aligned to its own size counted from the end of the
encapsulation header; a string is a ``uint32`` length that includes the terminating NUL, then the bytes; a
sequence is a ``uint32`` count, then the elements. Padding bytes are not defined (Fast DDS leaves whatever
was in the buffer), so nothing here compares them.

Anything else (big-endian or XCDR2 encapsulation, a buffer that ends early) is not parsed here:
:func:`read_joint_state` returns ``None``; :class:`JointStateReader` hands another encapsulation to rclpy
(``None``) and refuses a little-endian buffer it cannot parse (:class:`MalformedCDR`): rclpy's deserializer
would print an unthrottled line to stderr for each. The result is tested
against ``rclpy.serialization`` on hypothesis-generated messages (``test/nodes/test_cdr.py``). The fields
read (:class:`~robot_dynamics_ros.control.joint_mapping.JointStateFields`) are the ROS-free cores' input.
"""
from __future__ import annotations

import struct

from robot_dynamics_ros.control.joint_mapping import JointStateFields

#: encapsulation identifier + options of plain little-endian CDR (XCDR1), as rmw_fastrtps writes it
CDR_LE_HEADER = b"\x00\x01\x00\x00"
_HEADER_LEN = 4

_U32 = struct.Struct("<I")
_STAMP_AND_FRAME = struct.Struct("<iII")  # header.stamp.sec, header.stamp.nanosec, len(header.frame_id)
_DOUBLES: dict[int, struct.Struct] = {}


def _doubles(n: int) -> struct.Struct:
    s = _DOUBLES.get(n)
    if s is None:
        if len(_DOUBLES) > 64:  # bounded: a fuzzer sending every length must not grow this forever
            _DOUBLES.clear()
        s = _DOUBLES[n] = struct.Struct(f"<{n}d")
    return s


def fields_from_message(msg) -> JointStateFields:
    """The same fields from a deserialized ``sensor_msgs/JointState`` (duck-typed: ``header.stamp``,
    ``name``, ``position``, ``velocity``, ``effort``): the path for a message that came as an object."""
    st = msg.header.stamp
    return JointStateFields(st.sec * 1_000_000_000 + st.nanosec,
                            tuple(n.encode("utf-8", "replace") for n in msg.name),
                            tuple(msg.position), tuple(msg.velocity), tuple(msg.effort))


def read_joint_state(buf: bytes) -> JointStateFields | None:
    """Read a serialized ``sensor_msgs/JointState`` (plain little-endian CDR, see the module docstring).

    Args:
        buf: the serialized message as a ``raw=True`` subscription delivers it (encapsulation header first).

    Returns:
        The fields, or ``None`` when ``buf`` is not little-endian XCDR1 or ends before its last field; the
        caller then deserializes it with rclpy (which raises on a truly malformed buffer).
    """
    if buf[:_HEADER_LEN] != CDR_LE_HEADER:
        return None
    try:
        sec, nanosec, n = _STAMP_AND_FRAME.unpack_from(buf, 4)
        # absolute offset after header.frame_id (4 + 12 + n), aligned to 4: alignment counts from the end of
        # the 4-byte encapsulation header, so an absolute multiple of 4 is an aligned offset
        off = (16 + n + 3) & -4
        (count,) = _U32.unpack_from(buf, off)
        off += 4
        if count > len(buf):               # each name takes >= 5 bytes: a corrupt count, not a message
            return None
        names = []
        append = names.append
        u32 = _U32.unpack_from
        for _ in range(count):              # the per-name loop: a flood of new names pays it per message
            n = u32(buf, off)[0]
            if not n:                       # a CDR string always carries its NUL
                return None
            end = off + 3 + n               # the NUL
            append(buf[off + 4:end])
            off = (end + 4) & -4            # past the NUL, aligned to 4
    except struct.error:
        return None
    return _read_arrays(buf, off, sec * 1_000_000_000 + nanosec, tuple(names))


class MalformedCDR(ValueError):
    """A little-endian CDR buffer that is not a ``sensor_msgs/JointState`` (:meth:`JointStateReader.read`)."""


#: name orderings longer than this are always parsed in full (no compiled pattern: a real robot has far
#: fewer joints, and compiling a pattern for 10 000 names costs ~0.1 s)
MAX_PATTERN_NAMES = 256


class JointStateReader:
    """:func:`read_joint_state` with the name ordering of the previous message remembered: the 1 kHz
    case (the same names in the same order every message) is checked with one compiled pattern over the
    whole ``name`` sequence (counts, lengths and bytes; padding bytes are wildcards) instead of parsing the
    names one by one. Any other message is parsed in full and becomes the remembered ordering; its pattern
    is compiled when the same ordering arrives a second time in a row (at most :data:`MAX_PATTERN_NAMES`
    names).

    One reader per subscription (it is not shared between threads).
    """

    def __init__(self):
        self._names: tuple[bytes, ...] | None = None
        self._match = None

    def read(self, buf: bytes) -> JointStateFields | None:
        """The fields of the serialized JointState ``buf``; ``None`` for another encapsulation than plain
        little-endian CDR (the caller deserializes it with rclpy).

        Raises:
            MalformedCDR: ``buf`` is little-endian CDR but not a JointState (it ends early, a count or
                length does not fit). Not handed to rclpy: its deserializer prints a line to stderr for every
                such buffer, which no rate limit can hold back; the caller logs this error rate-limited.
        """
        if buf[:_HEADER_LEN] != CDR_LE_HEADER:
            return None
        fields = self._read_le(buf)
        if fields is None:
            raise MalformedCDR(f"{len(buf)} bytes of little-endian CDR that are not a sensor_msgs/JointState "
                               "(a count or length runs past the end)")
        return fields

    def _read_le(self, buf: bytes) -> JointStateFields | None:
        match = self._match
        if match is not None:
            try:
                sec, nanosec, n = _STAMP_AND_FRAME.unpack_from(buf, 4)
            except struct.error:
                return None
            off = 16 + n
            off += -(off - _HEADER_LEN) % 4
            m = match(buf, off)
            if m is not None:
                return _read_arrays(buf, m.end(), sec * 1_000_000_000 + nanosec, self._names)
        fields = read_joint_state(buf)
        if fields is None:
            return None
        if fields.names != self._names:
            # a new ordering: remember it, but compile its pattern only when it comes again (a flood of
            # ever-changing orderings must not pay a regex compile per message) and is not huge
            self._names = fields.names
            self._match = None
        elif self._match is None and len(fields.names) <= MAX_PATTERN_NAMES:
            self._match = _names_pattern(fields.names).match
        return fields


def _names_pattern(names: tuple[bytes, ...]):
    """A compiled pattern for the serialized ``name`` sequence ``names`` starting 4-aligned."""
    import re

    parts = [re.escape(_U32.pack(len(names)))]
    off = 4
    for name in names:
        n = len(name) + 1
        pad = -(off + 4 + n) % 4
        parts.append(re.escape(_U32.pack(n) + name + b"\x00") + (b"." * pad))
        off += 4 + n + pad
    return re.compile(b"".join(parts), re.DOTALL)


def _read_arrays(buf: bytes, off: int, stamp_ns: int, names: tuple[bytes, ...]) -> JointStateFields | None:
    """position, velocity, effort from ``off`` (right after the names): the tail of :func:`read_joint_state`."""
    arrays = []
    u32 = _U32.unpack_from
    try:
        for _ in range(3):
            off += -(off - _HEADER_LEN) % 4
            (n,) = u32(buf, off)
            off += 4
            if n:
                off += -(off - _HEADER_LEN) % 8
                if off + 8 * n > len(buf):
                    return None
                arrays.append(_doubles(n).unpack_from(buf, off))
                off += 8 * n
            else:
                arrays.append(())
    except struct.error:
        return None
    if off > len(buf):
        return None
    return JointStateFields(stamp_ns, names, arrays[0], arrays[1], arrays[2])


class Float64MultiArrayWriter:
    """Serializes ``std_msgs/Float64MultiArray`` commands of ``n`` values with a fixed ``layout`` into one
    preallocated buffer (the layout is serialized once, the values per call).

    Args:
        n: number of values per command.
        dims: ``layout.dim`` as ``(label, size, stride)`` tuples (e.g. one dimension labelled with the
            joint names); empty by default, which is what ros2_control's ``forward_command_controller``
            needs.
        data_offset: ``layout.data_offset``.

    ``write(values)`` deserializes (rclpy) to the message with these fields (tested); pass its result to
    ``Publisher.publish``, which sends bytes as they are.

    Raises:
        ValueError: ``n < 0``.
    """

    def __init__(self, n: int, dims=(), data_offset: int = 0):
        if n < 0:
            raise ValueError(f"n = {n}: a command has at least 0 values")
        self.n = int(n)
        buf = bytearray(CDR_LE_HEADER)

        def align(k: int) -> None:
            buf.extend(bytes(-(len(buf) - _HEADER_LEN) % k))

        buf += _U32.pack(len(dims))
        for label, size, stride in dims:
            text = str(label).encode("utf-8")
            align(4)
            buf += _U32.pack(len(text) + 1) + text + b"\x00"
            align(4)
            buf += _U32.pack(int(size)) + _U32.pack(int(stride))
        align(4)
        buf += _U32.pack(int(data_offset))
        buf += _U32.pack(self.n)
        if self.n:
            align(8)
        self._offset = len(buf)
        buf += bytes(8 * self.n)
        self._buf = buf
        self._pack = _doubles(self.n).pack_into if self.n else None

    def write(self, values) -> bytes:
        """Serialize ``values`` (``n`` floats, command order) and return the message bytes.

        Raises:
            ValueError: ``len(values) != n``.
            struct.error: a value is not a number.
        """
        if len(values) != self.n:
            raise ValueError(f"data has {len(values)} values, the writer was built for {self.n}")
        if self._pack is not None:
            self._pack(self._buf, self._offset, *values)
        return bytes(self._buf)


class JointStateEffortWriter:
    """Serializes the ``~/external_torque`` message — a ``sensor_msgs/JointState`` with a stamp, empty
    ``frame_id``, fixed ``name``, no position or velocity and ``n`` efforts — into one preallocated buffer,
    in the plain little-endian CDR (XCDR1) of :mod:`robot_dynamics_ros.nodes.cdr` (header, then fields in
    declaration order, each primitive aligned to its size from the end of the 4-byte encapsulation header;
    strings as uint32 length with the NUL, then bytes; sequences as uint32 count, then elements). What
    rclpy would spend turning a ``JointState`` object into bytes per message (the names, three arrays) is
    done once; ``write`` packs the stamp and the efforts. ``Publisher.publish(bytes)`` sends it as it is.
    """

    def __init__(self, names):
        buf = bytearray(CDR_LE_HEADER)

        def align(k: int) -> None:
            buf.extend(bytes(-(len(buf) - 4) % k))

        self._stamp_at = len(buf)
        buf += struct.pack("<iI", 0, 0) + struct.pack("<I", 1) + b"\x00"  # stamp, frame_id ""
        align(4)
        buf += struct.pack("<I", len(names))
        for name in names:
            text = str(name).encode("utf-8")
            align(4)
            buf += struct.pack("<I", len(text) + 1) + text + b"\x00"
        for _ in range(2):  # position, velocity: empty
            align(4)
            buf += struct.pack("<I", 0)
        align(4)
        self.n = len(names)
        buf += struct.pack("<I", self.n)
        if self.n:
            align(8)
        self._effort_at = len(buf)
        buf += bytes(8 * self.n)
        self._buf = buf
        self._stamp = struct.Struct("<iI").pack_into
        self._efforts = struct.Struct(f"<{self.n}d").pack_into

    def write(self, stamp_ns: int, effort) -> bytes:
        """The message bytes for ``header.stamp`` = ``stamp_ns`` (ns) and ``effort`` (n floats, N·m / N)."""
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        self._stamp(self._buf, self._stamp_at, sec, nanosec)
        self._efforts(self._buf, self._effort_at, *effort)
        return bytes(self._buf)
