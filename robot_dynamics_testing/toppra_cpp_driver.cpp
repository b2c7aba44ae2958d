// Driver for toppra's compiled C++ core (github.com/hungpham2511/toppra, cpp/src), used by
// benchmarks/bench_retiming.py through robot_dynamics_testing/toppra_cpp.py. Built in /tmp, never committed.
//
// Input (binary, little-endian doubles after two int64): N1 (gridpoints), n (joints), repeat (int64),
// then s (N1), xmax (N1) = velocity bound on sd^2, acceleration rows a_acc = q', b_acc = q'' (N1*n each,
// row-major), alim (n), torque rows a, b, c (N1*n each), tlim (n).
// Constraints as toppra's own classes build them: velocity as an x bound, acceleration and torque as
// linear constraints a u + b x + c in F v <= g with F = [I; -I], interpolation discretization (toppra's
// default). Solver: Seidel; algorithm: TOPPRA (backward controllable sets, greedy forward pass).
// Output (stdout, text): "status median_ns min_ns" (thread CPU time of one solve) then the N1 values of x = sd^2.
#include <toppra/algorithm/toppra.hpp>
#include <toppra/constraint.hpp>
#include <toppra/geometric_path.hpp>
#include <toppra/solver/seidel.hpp>

#include <algorithm>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

using namespace toppra;

namespace {

class FlatPath : public GeometricPath {
 public:
  FlatPath(int n, double s0, double s1) : GeometricPath(n), m_s0(s0), m_s1(s1) {}
  Vector eval_single(value_type, int) const override { return Vector::Zero(dof()); }
  Bound pathInterval() const override { Bound b; b << m_s0, m_s1; return b; }
 private:
  double m_s0, m_s1;
};

// a u + b x + c in [-lim, lim] per joint, coefficients given per gridpoint
class GivenRows : public LinearConstraint {
 public:
  GivenRows(int n, const double* a, const double* b, const double* c, const double* lim)
      : LinearConstraint(2 * n, n, true, false, false), m_n(n), m_a(a), m_b(b), m_c(c), m_lim(lim) {}
 protected:
  void computeParams_impl(const GeometricPath&, const Vector& s, Vectors& a, Vectors& b, Vectors& c,
                          Matrices& F, Vectors& g, Bounds&, Bounds&) override {
    for (Eigen::Index i = 0; i < s.size(); ++i) {
      for (int j = 0; j < m_n; ++j) {
        a[i][j] = m_a[i * m_n + j];
        b[i][j] = m_b[i * m_n + j];
        c[i][j] = m_c ? m_c[i * m_n + j] : 0.0;
      }
    }
    F[0].setZero();
    for (int j = 0; j < m_n; ++j) {
      F[0](j, j) = 1.0;
      F[0](m_n + j, j) = -1.0;
      g[0][j] = m_lim[j];
      g[0][m_n + j] = m_lim[j];
    }
  }
 private:
  int m_n;
  const double *m_a, *m_b, *m_c, *m_lim;
};

class GivenXBound : public LinearConstraint {
 public:
  GivenXBound(const double* xmax) : LinearConstraint(0, 0, true, false, true), m_xmax(xmax) {}
 protected:
  void computeParams_impl(const GeometricPath&, const Vector& s, Vectors&, Vectors&, Vectors&, Matrices&,
                          Vectors&, Bounds&, Bounds& xbound) override {
    for (Eigen::Index i = 0; i < s.size(); ++i) {
      xbound[i][0] = 0.0;
      xbound[i][1] = m_xmax[i];
    }
  }
 private:
  const double* m_xmax;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) { std::cerr << "usage: driver input.bin\n"; return 2; }
  std::ifstream in(argv[1], std::ios::binary);
  int64_t hdr[3];
  in.read(reinterpret_cast<char*>(hdr), sizeof(hdr));
  const int64_t N1 = hdr[0], n = hdr[1], repeat = std::max<int64_t>(1, hdr[2]);
  auto take = [&](int64_t k) { std::vector<double> v(k); in.read(reinterpret_cast<char*>(v.data()), k * 8); return v; };
  std::vector<double> s = take(N1), xmax = take(N1), qa = take(N1 * n), qb = take(N1 * n), alim = take(n),
                      ta = take(N1 * n), tb = take(N1 * n), tc = take(N1 * n), tlim = take(n);
  if (!in) { std::cerr << "short input\n"; return 2; }
  Vector grid = Eigen::Map<Vector>(s.data(), N1);
  std::vector<double> times;
  int status = -1;
  Vector x;
  for (int64_t r = 0; r < repeat; ++r) {
    timespec c0, c1;  // thread CPU time: insensitive to other processes on a shared machine
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    LinearConstraintPtrs cons{std::make_shared<GivenXBound>(xmax.data()),
                              std::make_shared<GivenRows>(n, qa.data(), qb.data(), nullptr, alim.data()),
                              std::make_shared<GivenRows>(n, ta.data(), tb.data(), tc.data(), tlim.data())};
    GeometricPathPtr path = std::make_shared<FlatPath>(n, s.front(), s.back());
    algorithm::TOPPRA algo(cons, path);
    algo.setGridpoints(grid);
    algo.solver(std::make_shared<solver::Seidel>());
    status = static_cast<int>(algo.computePathParametrization(0, 0));
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    times.push_back(1e9 * (c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec));
    x = algo.getParameterizationData().parametrization;
  }
  std::sort(times.begin(), times.end());
  std::printf("%d %.1f %.1f\n", status, times[times.size() / 2], times.front());
  for (Eigen::Index i = 0; i < x.size(); ++i) std::printf("%.17g\n", x[i]);
  return 0;
}
