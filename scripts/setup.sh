#!/usr/bin/env bash
# Set up a fresh checkout: .venv with ROS 2 (Kilted wheels from PyPI), Pinocchio, MuJoCo and the rest
# from requirements.txt, the robot_dynamics_interfaces package built with CMake and installed into the
# venv, and this package installed editable. Idempotent: each step runs only when its inputs changed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
say() { printf '[setup] %s\n' "$*"; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi

stamp_reqs=$VENV/.stamp-requirements
if [ ! -f "$stamp_reqs" ] || [ requirements.txt -nt "$stamp_reqs" ]; then
  say "installing pinned requirements (ROS 2 Kilted wheels, pin, mujoco, ...)"
  "$VENV/bin/python" -m pip install -q -r requirements.txt
  touch "$stamp_reqs"
fi

stamp_ifc=$VENV/.stamp-interfaces
if [ ! -f "$stamp_ifc" ] || [ -n "$(find robot_dynamics_interfaces -newer "$stamp_ifc" -type f | head -1)" ]; then
  say "building robot_dynamics_interfaces (rosidl, CMake) into $VENV"
  build=$ROOT/build/robot_dynamics_interfaces
  rm -rf "$build"; mkdir -p "$build"
  (
    export PATH="$VENV/bin:$PATH" CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV"
    cmake -S robot_dynamics_interfaces -B "$build" -DCMAKE_INSTALL_PREFIX="$VENV" \
      -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release >"$build/configure.log" 2>&1 \
      || { tail -40 "$build/configure.log"; exit 1; }
    cmake --build "$build" -j "$(nproc)" >"$build/build.log" 2>&1 || { tail -40 "$build/build.log"; exit 1; }
    cmake --install "$build" >"$build/install.log" 2>&1 || { tail -40 "$build/install.log"; exit 1; }
  )
  "$VENV/bin/python" -c "from robot_dynamics_interfaces.srv import RetimeTrajectory" \
    || { say "robot_dynamics_interfaces built but does not import"; exit 1; }
  touch "$stamp_ifc"
fi

stamp_pkg=$VENV/.stamp-package
if [ ! -f "$stamp_pkg" ] || [ setup.py -nt "$stamp_pkg" ] || [ setup.cfg -nt "$stamp_pkg" ]; then
  say "installing robot_dynamics_ros (editable)"
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  touch "$stamp_pkg"
fi
say "ready: $VENV"
