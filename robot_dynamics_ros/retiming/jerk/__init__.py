"""Jerk-limited time-optimal path parameterization on a fixed path, by sequential linear programming.

The path q(s) (a C² cubic spline :class:`~robot_dynamics_ros.retiming.path.JointPath`) is not changed; only the timing s(t) is. With
x = ṡ², u = s̈ and v = du/ds (so s⃛ = v ṡ), joint j's derivatives along the path are

    qd_j   = q'_j ṡ
    qdd_j  = q'_j u + q''_j x
    jerk_j = q'_j s⃛ + 3 q''_j ṡ s̈ + q'''_j ṡ³ = √x (q'''_j x + 3 q''_j u + q'_j v)            (1)

Velocity, acceleration and torque limits are linear in (u, x) (TOPP-RA's rows, τ = a u + b x + c); the jerk
limit |jerk_j| ≤ J_j is not convex in (x, u, v) (Pham & Pham, "On the structure of the time-optimal path
parameterization problem with third-order constraints", ICRA 2017). Written as

    |q'''_j x + 3 q''_j u + q'_j v| ≤ J_j / √x                                                  (2)

its left side is linear and its right side convex in x, so the tangent of J/√x at any x̄ > 0 lies below it
and replacing the right side by that tangent gives a *linear inner approximation*: every point that meets
the linearized rows meets (2) exactly (the "convex–concave" step of sequential convex programming,
Debrouwere et al., "Time-optimal path following for robots with convex–concave constraints using
sequential convex programming", IEEE T-RO 29(6), 2013).

Discretization. Gridpoints s_0 < … < s_{N-1} (one knot interval per stage, so q''' is constant on a
stage). Variables x_i, u_i at the gridpoints; on interior stages u is linear in s (v constant), so x is
the C¹ quadratic x(σ) = x_i + 2 u_i σ + v σ² and x_{i+1} = x_i + Δ_i (u_i + u_{i+1}) (linear equality).
The trajectory starts and ends at rest with zero acceleration: a rest-to-rest start with bounded jerk has
x ∝ s^{4/3} (s = j t³/6), which no polynomial x(s) has, so the first stage is the exact constant-path-
jerk start s(t) = x_1^{3/2} t³ / (27 Δ_0²) (then x = x_1 (s/Δ_0)^{4/3}, u_1 = 2 x_1 / (3 Δ_0), a linear
equality), and the last stage its mirror. On those two stages the joint jerk is x_1^{3/2} times a known
function of s (a quadratic in s − s_0, whose largest value is taken exactly), so the jerk limit there is a
plain upper bound on x_1 (resp. x_{N-2}). Stage times ∫ dσ/√x(σ) and their inversion for sampling are in
closed form (:mod:`.stage_time`), exact also where x nearly vanishes inside a stage.

Every row is imposed at both ends and the midpoint of every stage (the output uses the same x(s), u(s),
so the row values between check points differ only by the rows' curvature over half a stage). That
difference depends on the answer, so it is checked on the output (:func:`solve_jerk_limited`, 1 kHz):
a joint's limit exceeded on a stage is tightened at that stage's check points only and the problem
solved again from the last profile and basis.

Iteration (sequential linear programming). The first LP takes its tangents at a starting profile: the
solution of the same problem on a coarser grid — the knots where they are at most half the gridpoints
(each coarse stage one knot interval), else every 4th gridpoint (a stage may then hold several knots and
the third derivative is taken at its midpoint, which only moves the start) — recursively, down to fewer
than 40 gridpoints, where the torque-only TOPP-RA profile is the start (a coarse grid whose own start
leaves no feasible point in its first trust region — stages over several knots of a winding path — is
solved again from the TOPP-RA profile). Any x̄ > 0 gives a feasible
answer (inner approximation); near the answer it is also a good one. That first LP is an SLP step (below)
from the starting profile, without the trust region where the start is the TOPP-RA profile (far above the
answer) or the trust region leaves no feasible point; its objective has u terms, so its optimum is as
well defined as the later LPs' and does not depend on the simplex's pivot order. Only where its answer
stops the path (x = 0 inside a stage) do LPs on x alone (the gradient of Σ w_i x_i^{-1/2}, the columns
fixed at rest without cost) follow, the linearization point moved towards the answer each time. Then, at
the current profile z:
tangents at z, objective the gradient of the traversal time T = Σ ∫ ds/√x(s) at z (x and u,
the stage-time quadrature differentiated), x at every gridpoint within a trust region [z/2, 2z]. z is
feasible for that LP (the tangent is exact at z) and T is convex, so a backtracking line search on the
segment from z to the LP's answer keeps every iterate feasible and T monotone; stop when an iteration
gains < rtol. A fixed point is a KKT point of the discretized non-convex problem (the tangents share the
true rows' values and gradients there); no global guarantee. The optimality gap is bounded by the
torque-only TOPP-RA duration, a lower bound of the jerk-limited one.

LPs: HiGHS's dual simplex with Devex pricing (the HiGHS scipy ships). Of the ~15 000 rows (200
gridpoints, 6 joints) a few hundred are active, so each LP is solved on a working set — the rows with
little slack at the current profile, and on every stage the + and the − jerk row with the least slack, so
that no stage's v is unconstrained in the LP — and then every row is evaluated at the answer; violated rows
(and near neighbours) are added to the solved model and the dual simplex goes on from its basis, until
none is violated: the answer is then the full LP's optimum. Each SLP iteration's LP
starts from the previous LP's final basis and rows (its inactive rows with much slack dropped, the rows
with little slack at the new profile added as basic): between iterations the active set changes little, so
the dual simplex needs a few dozen pivots instead of the ~1 000 of a start from the slack basis (that basis
stays one, so HiGHS takes it without a rank check). The first LP of a solve begins from a
guessed basis: the least-slack row of each stage at the start profile active (a vertex has about one
active row per stage), which HiGHS repairs where it is singular. From the previous LP's final basis (the
SLP's later LPs) and from every optimal basis with violated rows added basic, the pivots to the optimum are
taken without HiGHS (:mod:`.vertex`: dual simplex on the banded matrix of the active rows, refactorized at
each pivot; a start that is not dual feasible made so by flipping bounds; a confirming LP takes none):
HiGHS's model set-up and first factorization alone cost more than the few pivots these LPs need. HiGHS
takes over from the basis reached where the pivots fail.

Data layout: every inequality row has three entries (the variables of one stage), so the rows are held as
(m, 3) column and coefficient arrays, built once per solve; an LP takes a subset by row index, the jerk
rows' tangents are rewritten in place and the slacks of all rows evaluated by compiled kernels, and the
stage times, their gradient and the output's time inversion too (numba, :mod:`.stage_time`). LP bases
travel as int8 arrays of HiGHS's basis-status values.

Modules: :mod:`.rounds` (:func:`solve_jerk_limited`: verification rounds on the output, stops inside the
path), :mod:`.slp` (one solve: the coarse start, the working-set LPs and the SLP iteration), :mod:`.rows`
(check points and every LP row, bound and equality), :mod:`.highs` (the HiGHS LP wrapper, the one import of
scipy's private HiGHS bindings), :mod:`.vertex` (an LP's answer from an optimal or dual feasible basis), :mod:`.profile`
(:class:`JerkSolution`: a timing x(s), u(s), its stage times, their gradient and its sampling),
:mod:`.stage_time` (exact stage times and their inverse).
"""
from __future__ import annotations

from robot_dynamics_ros.retiming.jerk.profile import JerkSolution, third_derivative
from robot_dynamics_ros.retiming.jerk.rounds import ACCEPT_TOL, STOP_RATIO, solve_jerk_limited

__all__ = ["JerkSolution", "solve_jerk_limited", "third_derivative", "ACCEPT_TOL", "STOP_RATIO"]
