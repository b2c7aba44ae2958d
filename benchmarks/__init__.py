"""Benchmarks of robot_dynamics_ros (not part of the installed package): run the ``bench_*.py`` scripts from
the repository (``make bench`` or ``python benchmarks/bench_<name>.py``). Their process harness and the
independent references they check outputs against are in :mod:`robot_dynamics_testing`."""
