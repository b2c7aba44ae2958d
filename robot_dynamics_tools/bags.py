"""rosbag2 files (sqlite3 and mcap) read and written with `rosbags`, messages as rclpy objects; ROS 1 bags read.

``ros2 bag`` (rosbag2) is not installable from PyPI, so this module is the project's bag layer: a thin
wrapper over :mod:`rosbags.rosbag2` (``Reader``/``Writer``) and a :mod:`rosbags.typesys` typestore (the
message definitions and RIHS01 type hashes of ROS 2 Humble, Jazzy, Kilted or rosbags' "latest").

Messages in and out are **rclpy message objects** (``sensor_msgs.msg.JointState``, ...), so the nodes, the
replay tool and the tests use one message type everywhere:

- reading deserializes each record's CDR bytes with ``rclpy.serialization.deserialize_message`` (the same
  Fast CDR code the middleware runs, which rejects truncated or corrupt records with an exception);
- :meth:`BagWriter.write` converts the rclpy message through the typestore (``serialize_cdr``), so the file
  is byte-for-byte what rosbags would write and readable by rosbags, rosbag2 and this module alike;
- :meth:`BagWriter.write_serialized` stores CDR bytes as they came off the wire (what ``ros2 bag record``
  does; used by the replay recorder with ``raw=True`` subscriptions).

Errors the user can fix are :class:`BagError` (a :class:`~robot_dynamics_ros.errors.UserError`) naming the
bag, and where relevant the topic, the expected and found message types, and the record index:

- a topic that is not in the bag (the message lists the topics it has),
- a topic holding another message type than the one asked for,
- a truncated or corrupt file (metadata, storage file or a single record that does not deserialize).

Nothing is written half-way without saying so: :class:`BagWriter` writes into a hidden temporary
directory beside the target and renames it into place only when the bag closed cleanly. If the block
using the writer raises, the temporary bag is deleted (``on_error="discard"``, the default) or closed and
kept as ``<path>.partial`` (``on_error="keep"``); either way a warning names what happened, and the
exception carries a note saying so.

Example::

    from sensor_msgs.msg import JointState
    from robot_dynamics_tools.bags import BagWriter, read_messages

    with BagWriter("run1", storage="mcap") as bag:
        bag.write("/joint_states", JointState(name=["j1"], position=[0.1]), t_ns=1_000_000_000)
    for m in read_messages("run1", {"/joint_states": JointState}):
        print(m.topic, m.t_ns, m.msg.position)
"""
from __future__ import annotations

import importlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from robot_dynamics_ros.errors import UserError

logger = logging.getLogger(__name__)

#: storage plugins rosbag2 and rosbags both know
STORAGE_FORMATS = ("sqlite3", "mcap")

#: typestore names accepted by ``distro=`` -> rosbags ``Stores`` member name
DISTROS = {"humble": "ROS2_HUMBLE", "jazzy": "ROS2_JAZZY", "kilted": "ROS2_KILTED", "latest": "LATEST"}

#: the message types this project records and replays (any other ROS 2 type also works)
JOINT_STATE = "sensor_msgs/msg/JointState"
FLOAT64_MULTI_ARRAY = "std_msgs/msg/Float64MultiArray"
JOINT_TRAJECTORY = "trajectory_msgs/msg/JointTrajectory"
DIAGNOSTIC_ARRAY = "diagnostic_msgs/msg/DiagnosticArray"


class BagError(UserError):
    """A rosbag2 file cannot be read or written as asked; the message names the bag and topic."""


@dataclass(frozen=True)
class BagMessage:
    """One record of a bag.

    Attributes:
        topic: topic name, e.g. ``"/joint_states"``.
        msgtype: ROS 2 type name, e.g. ``"sensor_msgs/msg/JointState"``.
        t_ns: record (receive) time, ns since the epoch (rosbag2's ``timestamp``).
        msg: the deserialized rclpy message object.
    """

    topic: str
    msgtype: str
    t_ns: int
    msg: Any


# --------------------------------------------------------------------------------------------------- types
def msgtype_name(msg_or_class: Any) -> str:
    """ROS 2 type name ``pkg/msg/Name`` of an rclpy message object or class (or a rosbags message).

    Raises:
        BagError: the object is not a ROS 2 message.
    """
    if isinstance(msg_or_class, str):
        return normalize_msgtype(msg_or_class)
    rosbags_type = getattr(msg_or_class, "__msgtype__", None)
    if isinstance(rosbags_type, str):
        return rosbags_type
    cls = msg_or_class if isinstance(msg_or_class, type) else type(msg_or_class)
    module = cls.__module__.split(".")  # e.g. sensor_msgs.msg._joint_state
    if len(module) >= 2 and module[1] in ("msg", "srv", "action") and hasattr(cls, "get_fields_and_field_types"):
        return f"{module[0]}/{module[1]}/{cls.__name__}"
    raise BagError(f"{cls.__qualname__} is not a ROS 2 message class")


def normalize_msgtype(name: str) -> str:
    """``"sensor_msgs/JointState"`` or ``"sensor_msgs/msg/JointState"`` -> ``"sensor_msgs/msg/JointState"``.

    Raises:
        BagError: not of the form ``pkg/Name`` or ``pkg/msg/Name``.
    """
    parts = name.strip("/").split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3 or not all(parts):
        raise BagError(f"message type '{name}': expected 'pkg/msg/Name'")
    return "/".join(parts)


@lru_cache(maxsize=None)
def rclpy_class(msgtype: str) -> type:
    """The rclpy message class of a type name (``sensor_msgs/msg/JointState`` -> ``JointState``).

    Raises:
        BagError: the Python package of that message type is not installed.
    """
    pkg, kind, name = normalize_msgtype(msgtype).split("/")
    try:
        return getattr(importlib.import_module(f"{pkg}.{kind}"), name)
    except (ImportError, AttributeError) as exc:
        raise BagError(f"message type '{msgtype}' is not installed as an rclpy message ({exc})") from None


@lru_cache(maxsize=None)
def typestore(distro: str = "latest"):
    """The rosbags typestore holding the message definitions of a ROS 2 distribution.

    Args:
        distro: one of :data:`DISTROS` (``humble``, ``jazzy``, ``kilted``, ``latest``).

    Raises:
        BagError: unknown distro.
    """
    from rosbags.typesys import Stores, get_typestore

    if distro not in DISTROS:
        raise BagError(f"distro '{distro}': expected one of {sorted(DISTROS)}")
    return get_typestore(getattr(Stores, DISTROS[distro]))


def rclpy_to_rosbags(msg: Any, store) -> Any:
    """Convert an rclpy message object into the equivalent rosbags message object of ``store``.

    Goes through CDR: the rclpy message is serialized by rclpy (Fast CDR) and deserialized by the
    typestore's generated code. rclpy's buffer can end with padding/slack bytes after the message, which
    ``Typestore.deserialize_cdr`` rejects as a size mismatch; this decoder ignores them.

    Raises:
        BagError: the typestore has no definition of the message type, or the definitions differ.
    """
    from rclpy.serialization import serialize_message

    msgtype = msgtype_name(msg)
    return _decode_rosbags(bytes(serialize_message(msg)), msgtype, store)


def rosbags_to_rclpy(obj: Any, store) -> Any:
    """Convert a rosbags message object of ``store`` into the rclpy message object of the same type.

    Raises:
        BagError: the rclpy message package is not installed or cannot read the typestore's encoding.
    """
    from rclpy.serialization import deserialize_message

    msgtype = obj.__msgtype__
    return deserialize_message(bytes(store.serialize_cdr(obj, msgtype)), rclpy_class(msgtype))


def exact_cdr(data: bytes, msgtype: str, store) -> bytes:
    """``data`` (CDR bytes of a ``msgtype``) without the bytes after the message's end.

    Raises:
        BagError: the bytes are not a ``msgtype`` of ``store`` (naming the type and the reason).
    """
    _, end = _decode_rosbags_end(data, msgtype, store)
    return data[:end]


def _decode_rosbags(data: bytes, msgtype: str, store) -> Any:
    return _decode_rosbags_end(data, msgtype, store)[0]


def _decode_rosbags_end(data: bytes, msgtype: str, store) -> tuple[Any, int]:
    try:
        msgdef = store.get_msgdef(msgtype)
    except Exception:  # rosbags raises TypesysError (KeyError subclass in some versions)
        raise BagError(f"message type '{msgtype}' is not in the rosbags typestore") from None
    if len(data) < 4 or data[:2] not in (b"\x00\x00", b"\x00\x01"):
        raise BagError(f"{msgtype}: not CDR data")
    func = msgdef.deserialize_cdr_le if data[1] else msgdef.deserialize_cdr_be
    try:
        obj, pos = func(memoryview(data)[4:], 0, msgdef.cls, store)
    except Exception as exc:
        raise BagError(f"{msgtype}: CDR data does not match the typestore's definition ({exc})") from None
    if 4 + pos > len(data):
        raise BagError(f"{msgtype}: CDR data ends {4 + pos - len(data)} bytes early")
    # Bytes left over are not checked: rclpy's serialized buffers carry unspecified slack after the data.
    return obj, 4 + pos


# -------------------------------------------------------------------------------------------------- writer
class BagWriter:
    """Write a rosbag2 bag (a directory with ``metadata.yaml`` and one ``.db3`` or ``.mcap`` file).

    Use as a context manager. Topics are registered on first write with the message's type; writing
    another type to the same topic raises :class:`BagError`. The bag appears at ``path`` only when the
    ``with`` block ends without an exception (see the module docstring for what happens otherwise).

    Args:
        path: directory of the bag to create; must not exist.
        storage: ``"sqlite3"`` (rosbag2's default up to Iron) or ``"mcap"`` (default since Jazzy).
        distro: typestore used for message definitions and type hashes (:data:`DISTROS`). rosbag2 metadata
            version 8 is written for ``humble``, 9 otherwise.
        on_error: ``"discard"`` (delete the unfinished bag) or ``"keep"`` (close it and keep it as
            ``<path>.partial``) when the ``with`` block raises.

    Raises:
        BagError: unknown storage/distro/on_error, or ``path`` exists already.
    """

    def __init__(self, path: str | Path, *, storage: str = "sqlite3", distro: str = "latest",
                 on_error: str = "discard") -> None:
        if storage not in STORAGE_FORMATS:
            raise BagError(f"storage '{storage}': expected one of {list(STORAGE_FORMATS)}")
        if on_error not in ("discard", "keep"):
            raise BagError(f"on_error '{on_error}': expected 'discard' or 'keep'")
        self.path = Path(path)
        self.storage = storage
        self.distro = distro
        self.on_error = on_error
        self.store = typestore(distro)
        self.message_count = 0
        self._tmpdir: Path | None = None
        self._writer = None
        self._connections: dict[str, Any] = {}  # topic -> rosbags Connection

    # context manager -------------------------------------------------------------------------------
    def __enter__(self) -> BagWriter:
        self.open()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is None:
            self.close()
        else:
            self.fail(exc)
        return False

    def open(self) -> None:
        """Create the temporary bag beside :attr:`path`.

        Raises:
            BagError: :attr:`path` exists already or its directory is not writable.
        """
        from rosbags.rosbag2 import StoragePlugin, Writer

        if self.path.exists():
            raise BagError(f"bag '{self.path}' exists already; not overwriting (choose another --out)")
        parent = self.path.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
            self._tmpdir = Path(tempfile.mkdtemp(prefix=f".{self.path.name}.", suffix=".partial", dir=parent))
        except OSError as exc:
            raise BagError(f"bag '{self.path}': cannot create it ({exc.strerror})") from None
        plugin = StoragePlugin.MCAP if self.storage == "mcap" else StoragePlugin.SQLITE3
        self._writer = Writer(self._tmpdir / self.path.name, version=8 if self.distro == "humble" else 9,
                              storage_plugin=plugin)
        self._writer.open()

    @property
    def topics(self) -> dict[str, str]:
        """Topics registered so far: name -> message type."""
        return {t: c.msgtype for t, c in self._connections.items()}

    def add_topic(self, topic: str, msgtype: str | type) -> None:
        """Register ``topic`` with a message type (done implicitly by the first write).

        Raises:
            BagError: the topic is registered with another type, or the typestore lacks the type.
        """
        self._connection(topic, msgtype_name(msgtype))

    def _connection(self, topic: str, msgtype: str):
        if self._writer is None:
            raise BagError(f"bag '{self.path}' is not open (use 'with BagWriter(...) as bag:')")
        conn = self._connections.get(topic)
        if conn is not None:
            if conn.msgtype != msgtype:
                raise BagError(f"bag '{self.path}': topic '{topic}' holds {conn.msgtype}; cannot write a {msgtype}")
            return conn
        try:
            conn = self._writer.add_connection(topic, msgtype, typestore=self.store)
        except Exception as exc:  # unknown type in the typestore
            raise BagError(f"bag '{self.path}': topic '{topic}': type {msgtype} not in the '{self.distro}' "
                           f"typestore ({exc})") from None
        self._connections[topic] = conn
        return conn

    def write(self, topic: str, msg: Any, t_ns: int) -> None:
        """Write one message.

        Args:
            topic: topic name.
            msg: rclpy message object (or a rosbags message object of this writer's typestore).
            t_ns: record time, ns since the epoch (int >= 0).

        Raises:
            BagError: wrong type for the topic, bad ``t_ns``.
        """
        msgtype = msgtype_name(msg)
        conn = self._connection(topic, msgtype)
        obj = msg if hasattr(msg, "__msgtype__") else rclpy_to_rosbags(msg, self.store)
        self._write(conn, t_ns, self.store.serialize_cdr(obj, msgtype))

    def write_serialized(self, topic: str, msgtype: str | type, data: bytes, t_ns: int) -> None:
        """Write one message given as CDR bytes (e.g. from an rclpy ``raw=True`` subscription).

        Every record is checked against the typestore before it is written, so whatever this writer
        writes deserializes with rosbags: bytes after the message's end (rclpy's ``serialize_message``
        can report a buffer longer than the data, the excess uninitialized) are cut off.

        Raises:
            BagError: wrong type for the topic, bad ``t_ns``, bytes that are not a message of the type.
        """
        conn = self._connection(topic, msgtype_name(msgtype))
        self._write(conn, t_ns, exact_cdr(bytes(data), conn.msgtype, self.store))

    def _write(self, conn, t_ns: int, data) -> None:
        if not isinstance(t_ns, int) or t_ns < 0:
            raise BagError(f"bag '{self.path}': topic '{conn.topic}': t_ns must be an int >= 0, got {t_ns!r}")
        self._writer.write(conn, t_ns, data)
        self.message_count += 1

    def close(self) -> Path:
        """Finish the bag and move it to :attr:`path`; returns :attr:`path`.

        Raises:
            BagError: the bag could not be finished or moved (the message says where the data is).
        """
        if self._writer is None:
            return self.path
        writer, self._writer = self._writer, None
        try:
            writer.close()
        except Exception as exc:
            self._discard()
            raise BagError(f"bag '{self.path}': finishing failed ({exc}); nothing was written") from None
        try:
            os.rename(self._tmpdir / self.path.name, self.path)
        except OSError as exc:
            raise BagError(f"bag '{self.path}': cannot move it into place ({exc.strerror}); the complete bag is "
                           f"at '{self._tmpdir / self.path.name}'") from None
        shutil.rmtree(self._tmpdir, ignore_errors=True)
        return self.path

    def fail(self, exc: BaseException | None = None) -> Path | None:
        """End an unfinished bag after an error: discard it or keep it as ``<path>.partial``.

        Logs a warning saying which, and adds a note to ``exc``. Returns the kept path or None.
        """
        if self._writer is None:
            return None
        writer, self._writer = self._writer, None
        kept: Path | None = None
        if self.on_error == "keep":
            try:
                writer.close()
                kept = self.path.with_name(self.path.name + ".partial")
                n = 1
                while kept.exists():
                    n += 1
                    kept = self.path.with_name(f"{self.path.name}.partial{n}")
                os.rename(self._tmpdir / self.path.name, kept)
            except Exception:  # noqa: BLE001 - fall back to discarding
                kept = None
        if kept is None:
            try:
                writer.abort()
            except Exception:  # noqa: BLE001
                pass
        self._discard()
        what = (f"the {self.message_count} messages written so far are kept in '{kept}'" if kept
                else f"nothing was written to '{self.path}'")
        text = f"bag '{self.path}' not finished: {what}"
        logger.warning(text)
        if exc is not None:
            exc.add_note(text)
        return kept

    def _discard(self) -> None:
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)


def write_bag(path: str | Path, records: Iterable[tuple[str, int, Any]], *, storage: str = "sqlite3",
              distro: str = "latest") -> int:
    """Write ``(topic, t_ns, rclpy message)`` records into a new bag; returns the message count.

    Raises:
        BagError: as :class:`BagWriter`.
    """
    with BagWriter(path, storage=storage, distro=distro) as bag:
        for topic, t_ns, msg in records:
            bag.write(topic, msg, t_ns)
    return bag.message_count


# -------------------------------------------------------------------------------------------------- reader
#: the first bytes of a ROS 1 bag (format 2.0, the only one rosbag wrote since ROS C Turtle)
ROS1_MAGIC = b"#ROSBAG V2.0\n"


def is_ros1_bag(path: str | Path) -> bool:
    """Whether ``path`` is a regular file starting with the ROS 1 bag header."""
    p = Path(path)
    try:
        if not p.is_file():
            return False
        with open(p, "rb") as fh:
            return fh.read(len(ROS1_MAGIC)) == ROS1_MAGIC
    except OSError:
        return False


class BagReader:
    """Read a rosbag2 bag directory (sqlite3 or mcap, found from ``metadata.yaml``), a bare ``.mcap``/``.db3``,
    or a ROS 1 ``.bag`` (recognised by its header, whatever its name).

    A ROS 1 bag is read with :mod:`rosbags.rosbag1`; each record is converted to the ROS 2 CDR of the same
    type with the ROS 2 typestore (``Typestore.ros1_to_cdr``, what ``rosbags-convert`` does for types of
    the same wire format: the header's ``seq`` is dropped; JointState and JointTrajectory are such types),
    so :meth:`messages` yields ROS 2 messages either way and its type names are ROS 2's
    (``sensor_msgs/msg/JointState``).

    Args:
        path: the bag.

    Raises:
        BagError: missing path, unreadable/truncated metadata or storage file.
    """

    def __init__(self, path: str | Path) -> None:
        from rosbags.rosbag2 import Reader

        self.path = Path(path)
        if not self.path.exists():
            raise BagError(f"bag '{self.path}': no such file or directory")
        #: a ROS 1 bag (its records are converted to ROS 2 CDR as they are read)
        self.ros1 = is_ros1_bag(self.path)
        try:
            if self.ros1:
                from rosbags.rosbag1 import Reader as Ros1Reader

                self._reader = Ros1Reader(self.path)
            else:
                self._reader = Reader(self.path)
            self._reader.open()
        except Exception as exc:  # ReaderError, apsw.Error, FileNotFoundError, YAML errors ...
            kind = "ROS 1 bag" if self.ros1 else "bag"
            raise BagError(f"{kind} '{self.path}' cannot be opened (truncated or corrupt?): "
                           f"{type(exc).__name__}: {exc}") from None

    def __enter__(self) -> BagReader:
        return self

    def __exit__(self, *exc) -> bool:
        self.close()
        return False

    def close(self) -> None:
        try:
            self._reader.close()
        except Exception:  # noqa: BLE001
            pass

    @property
    def storage(self) -> str:
        """``"sqlite3"`` or ``"mcap"`` (``"ros1"`` for a ROS 1 bag)."""
        if self.ros1:
            return "ros1"
        files = getattr(self._reader.storage, "files", None)
        names = [str(f.get("path", "")) for f in files] if files else [self.path.name]
        return "mcap" if any(n.endswith(".mcap") for n in names) else "sqlite3"

    @property
    def topics(self) -> dict[str, str]:
        """Topic name -> message type."""
        return {c.topic: c.msgtype for c in self._reader.connections}

    @property
    def counts(self) -> dict[str, int]:
        """Topic name -> number of messages (from the bag's index)."""
        out: dict[str, int] = {}
        for c in self._reader.connections:
            out[c.topic] = out.get(c.topic, 0) + c.msgcount
        return out

    @property
    def start_ns(self) -> int:
        return int(self._reader.start_time)

    @property
    def duration_ns(self) -> int:
        return int(self._reader.duration)

    def check_topics(self, wanted: Mapping[str, str | type | None] | Sequence[str]) -> dict[str, str]:
        """Check that each wanted topic is in the bag with the wanted type; returns topic -> type.

        Args:
            wanted: topic names, or topic -> message type (name or rclpy class; None: any type).

        Raises:
            BagError: a topic is missing (names it and lists those present) or holds another type.
        """
        if not isinstance(wanted, Mapping):
            wanted = dict.fromkeys(wanted)
        present = self.topics
        out: dict[str, str] = {}
        for topic, expected in wanted.items():
            if topic not in present:
                have = ", ".join(f"{t} ({m})" for t, m in sorted(present.items())) or "none"
                raise BagError(f"bag '{self.path}': topic '{topic}' is not in the bag (topics: {have})")
            found = present[topic]
            if expected is not None and found != msgtype_name(expected):
                raise BagError(f"bag '{self.path}': topic '{topic}' holds {found}, expected "
                               f"{msgtype_name(expected)}")
            out[topic] = found
        return out

    def messages(self, topics: Mapping[str, str | type | None] | Sequence[str] | None = None,
                 *, raw: bool = False) -> Iterator[BagMessage]:
        """Yield the records of ``topics`` (all topics if None) in time order, deserialized to rclpy.

        Args:
            topics: as :meth:`check_topics`.
            raw: yield the CDR bytes (``msg`` is ``bytes``) instead of deserializing.

        Raises:
            BagError: missing topic / wrong type (before anything is yielded); a record that does not
                deserialize (names topic, record index and time); a storage file that ends early.
        """
        from rclpy.serialization import deserialize_message

        wanted = self.check_topics(topics) if topics is not None else self.topics
        conns = [c for c in self._reader.connections if c.topic in wanted]
        classes = {} if raw else {t: rclpy_class(m) for t, m in wanted.items()}
        store = typestore("latest") if self.ros1 else None
        index = 0
        try:
            for conn, t_ns, data in self._reader.messages(connections=conns):
                if store is not None:
                    try:
                        data = store.ros1_to_cdr(data, conn.msgtype)
                    except Exception as exc:
                        raise BagError(f"ROS 1 bag '{self.path}': topic '{conn.topic}': record {index} at "
                                       f"t={t_ns} ns is not a valid {conn.msgtype} ({type(exc).__name__})") from None
                if raw:
                    msg = bytes(data)
                else:
                    try:
                        msg = deserialize_message(bytes(data), classes[conn.topic])
                    except Exception as exc:
                        raise BagError(f"bag '{self.path}': topic '{conn.topic}': record {index} at t={t_ns} ns "
                                       f"is not a valid {conn.msgtype} ({type(exc).__name__})") from None
                index += 1
                yield BagMessage(conn.topic, conn.msgtype, int(t_ns), msg)
        except BagError:
            raise
        except Exception as exc:  # ReaderError / apsw / struct errors from a truncated storage file
            raise BagError(f"bag '{self.path}': reading stopped after {index} records (truncated or corrupt?): "
                           f"{type(exc).__name__}: {exc}") from None


def read_messages(path: str | Path, topics: Mapping[str, str | type | None] | Sequence[str] | None = None
                  ) -> list[BagMessage]:
    """All records of ``topics`` of the bag at ``path``, in time order (see :meth:`BagReader.messages`).

    Raises:
        BagError: as :class:`BagReader`.
    """
    with BagReader(path) as bag:
        return list(bag.messages(topics))
