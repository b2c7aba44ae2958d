"""DDS isolation of the self-contained commands (``demo``, ``track``, ``bench``) and of the tests.

These commands publish effort commands and joint states on the standard topic names
(``/effort_controller/commands``, ``/joint_states``). On the caller's ROS domain that would command a real
robot listening there, so they never use it: each run picks a private domain id chosen by the code, and
restricts discovery to this host, because every participant of such a run lives in this process (or in
child processes started with :func:`private_environment`).

What is decided here, in one place:

- the private domain id lies in :data:`PRIVATE_DOMAINS` (102..201, inside Fast DDS's usable 0..232) and is
  never the caller's ``ROS_DOMAIN_ID`` (0 when unset, ROS 2's default);
- the discovery range is ``LOCALHOST`` for a private run (:func:`init_context`). ``robot-dynamics run`` and
  ``replay`` do not come here: they start nodes meant to be reached from other hosts and leave both the
  domain and the discovery range to the environment;
- an explicit ``--domain-id N`` of ``demo``/``track`` is the user asking to watch the run: the domain N is
  used as given (it may be the caller's) and discovery is left to the environment.

rcl reads ``ROS_AUTOMATIC_DISCOVERY_RANGE`` while initialising a context, so :func:`init_context` sets it
for the duration of ``rclpy.init`` only and restores the caller's value afterwards (call it from the main
thread, before other threads initialise contexts).
"""
from __future__ import annotations

import os
from contextlib import contextmanager

#: domain ids a private run may use (inclusive range); 0..101 are left to users' networks
PRIVATE_DOMAINS = (102, 201)
#: environment variables rcl reads for the domain and the discovery range
DOMAIN_ENV = "ROS_DOMAIN_ID"
RANGE_ENV = "ROS_AUTOMATIC_DISCOVERY_RANGE"
#: the caller's domain as it was before a process switched its environment to a private one (set by
#: :func:`private_environment`), so a child or a re-executed process still avoids the original
ORIGINAL_DOMAIN_ENV = "ROBOT_DYNAMICS_CALLER_DOMAIN_ID"
#: ``"lo-hi"``: a sub-range of :data:`PRIVATE_DOMAINS` this process and its children draw from, so that
#: concurrent runs on one host given disjoint sub-ranges (the test workers, see test/conftest.py) never share
#: a domain; ignored unless it lies inside :data:`PRIVATE_DOMAINS`
SHARE_ENV = "ROBOT_DYNAMICS_PRIVATE_DOMAINS"


def caller_domain_id(env=None) -> int:
    """The domain the caller's environment selects: ``$ROS_DOMAIN_ID``, 0 (ROS 2's default) when unset or
    not an integer."""
    text = (os.environ if env is None else env).get(DOMAIN_ENV, "").strip()
    return int(text) if text.isdigit() else 0


def private_range(env=None) -> tuple[int, int]:
    """The domains a private run of this process may use: ``$ROBOT_DYNAMICS_PRIVATE_DOMAINS`` (``"lo-hi"``)
    when it is a sub-range of :data:`PRIVATE_DOMAINS`, else :data:`PRIVATE_DOMAINS`."""
    text = (os.environ if env is None else env).get(SHARE_ENV, "")
    lo_text, _, hi_text = text.partition("-")
    if lo_text.strip().isdigit() and hi_text.strip().isdigit():
        lo, hi = int(lo_text), int(hi_text)
        if PRIVATE_DOMAINS[0] <= lo <= hi <= PRIVATE_DOMAINS[1]:
            return lo, hi
    return PRIVATE_DOMAINS


def share_of_private_domains(index: int, count: int) -> str:
    """The ``index``-th of ``count`` disjoint sub-ranges of :data:`PRIVATE_DOMAINS`, as ``"lo-hi"`` for
    :data:`SHARE_ENV` (concurrent private runs on one host, e.g. test workers)."""
    lo, hi = PRIVATE_DOMAINS
    size = (hi - lo + 1) // max(1, count)
    if not 0 <= index < count or size < 2:
        raise ValueError(f"share {index} of {count}: {PRIVATE_DOMAINS} cannot be split so")
    return f"{lo + index * size}-{lo + (index + 1) * size - 1}"


def private_domain_id(*, avoid=(), seed: int | None = None) -> int:
    """A domain id in :func:`private_range` (default :data:`PRIVATE_DOMAINS`) that is neither the caller's
    nor in ``avoid``.

    Derived from ``seed`` (default: the process id), so concurrent runs on one host usually differ too.
    """
    lo, hi = private_range()
    size = hi - lo + 1
    taken = {caller_domain_id(), *(int(a) for a in avoid)}
    original = os.environ.get(ORIGINAL_DOMAIN_ENV, "")
    if original.isdigit():
        taken.add(int(original))
    start = (os.getpid() if seed is None else int(seed)) % size
    for k in range(size):
        d = lo + (start + k) % size
        if d not in taken:
            return d
    raise RuntimeError(f"no free private DDS domain in {(lo, hi)}")  # only with a huge ``avoid``


def check_domain_id(domain_id: int, option: str = "--domain-id") -> int:
    """``domain_id`` if within 0..232 (the ids Fast DDS maps to ports), else a UserError naming ``option``."""
    from robot_dynamics_ros.errors import UserError

    if not 0 <= int(domain_id) <= 232:
        raise UserError(f"{option} {domain_id}: must be within [0, 232]")
    return int(domain_id)


@contextmanager
def _env(name: str, value: str | None):
    old = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if value is not None:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


def resolve(domain_id: int | None = None) -> tuple[int, bool]:
    """``(domain_id, localhost)`` of a self-contained run: None → (a :func:`private_domain_id`, True);
    an explicit id → (that id, False: discovery as the environment says)."""
    if domain_id is None:
        return private_domain_id(), True
    return check_domain_id(domain_id), False


def init_context(domain_id: int | None = None, *, localhost: bool | None = None, args=None,
                 signal_handler_options=None):
    """Create and initialise an rclpy context for a self-contained run; return ``(context, domain_id)``.

    ``domain_id`` None: a :func:`private_domain_id`. ``localhost`` None: True for a private domain, False
    (the environment's discovery range) for an explicit one.
    """
    import rclpy

    d, private = resolve(domain_id)
    if localhost is None:
        localhost = private
    ctx = rclpy.Context()
    kwargs = {} if signal_handler_options is None else {"signal_handler_options": signal_handler_options}
    with _env(RANGE_ENV, "LOCALHOST" if localhost else None):
        rclpy.init(context=ctx, domain_id=d, args=args, **kwargs)
    return ctx, d


def private_environment(domain_id: int | None = None, base=None) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) for a private run's process or its children:
    ``ROS_DOMAIN_ID`` = ``domain_id`` (default a :func:`private_domain_id`), localhost-only discovery, and
    :data:`ORIGINAL_DOMAIN_ENV` remembering the caller's domain (kept when already set)."""
    env = dict(os.environ if base is None else base)
    env.setdefault(ORIGINAL_DOMAIN_ENV, str(caller_domain_id(env)))
    env[DOMAIN_ENV] = str(private_domain_id() if domain_id is None else check_domain_id(domain_id))
    env[RANGE_ENV] = "LOCALHOST"
    return env
