"""One module per ``robot-dynamics`` subcommand (see :mod:`robot_dynamics_tools.cli`)."""
