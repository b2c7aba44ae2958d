"""robot_dynamics_tools: the developer tools around the runtime package robot_dynamics_ros.

The ``robot-dynamics`` command (:mod:`.cli`, one module per subcommand in :mod:`.commands`): ``demo``,
``run`` (one OS process per node), ``track``, ``replay``, ``casestudy``, ``push``, ``identify``, ``excite``,
``retime``, ``dynamics``, ``crossval``; rosbag2 I/O (:mod:`.bags`, :mod:`.recordings`). Tools build nodes and
cores through their public constructors only; the runtime package never imports this one.
"""
