// Op table: torch.linalg.ldl_factor(_ex) and ldl_solve on mytorch, composed from native tensor ops (Note [LDL]).
//
// Note [LDL]
// A = P L D L^T P^T by Bunch-Kaufman diagonal pivoting, in LAPACK's compact form (sytrf with uplo = 'L', which
// ATen's CPU kernel calls): D's 1x1 and 2x2 blocks and L's columns below them in LD, the interchanges in pivots
// (1-based; a 2x2 block's two entries both -p), L being the product of the steps' P(k) L(k) (an interchange moves
// the trailing rows only). The factorization walks the columns as LAPACK's unblocked sytf2 does -- the pivot
// test |a_kk| >= alpha colmax, then alpha colmax (colmax / rowmax), then |a_rr| >= alpha rowmax, alpha =
// (1 + sqrt(17)) / 8, a zero or NaN column recorded in info and skipped -- with each step's rank-1 or rank-2
// update of the trailing block as one device op, and one or two host reads per column for the pivot decision
// (the decision needs the values; LAPACK makes the same reads). ldl_solve applies the steps to B forwards and
// backwards as sytrs does (float32 factored and solved in float64, rounded once). Per matrix, a host loop over the
// batch: the pivots differ per matrix. The real dtypes only: complex (the symmetric and Hermitian variants) goes to
// the CPU fallback, counted. That composition is the cuda and emulated runtimes' path; the sim takes the Solver
// host route (Note [Sim host route]): LAPACK's sytrf and sytrs, through ATen's CPU kernels on host views, as its
// LU and Cholesky do (the composition's column steps cost 2.5 ms where the CPU's sytrf took 25 us on op_db's
// 3 x 3 x 20 x 20 sample, `python -m mytorch.testing.speed --ops linalg.ldl`).
#include <ATen/core/Tensor.h>
#include <ATen/native/LinearAlgebraUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/linalg_ldl_factor_ex.h>
#include <ATen/ops/linalg_ldl_solve.h>
#include <ATen/ops/linalg_ldl_factor_ex_ops.h>
#include <ATen/ops/linalg_ldl_solve_ops.h>
#include <ATen/ops/outer.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"

namespace mytorch {
namespace {

using at::Tensor;

bool ldlDtype(const Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble; }

// LAPACK's sytrs trusts the pivots it is given (a row index out of range is a read outside the matrix): each entry
// a 1-based row, a 2x2 block's two entries equal and negative, as sytrf writes them. The composition's row selects
// raise on the same input.
void checkPivots(const Tensor& pivots, int64_t n) {
  const Tensor hp = hostView(pivots.contiguous());
  const int32_t* p = hp.const_data_ptr<int32_t>();
  for (int64_t b = 0; b < hp.size(0); ++b, p += n) {
    for (int64_t k = 0; k < n;) {
      const bool pair = p[k] < 0;
      const int64_t row = pair ? -static_cast<int64_t>(p[k]) : p[k];
      TORCH_CHECK(row >= 1 && row <= n && (!pair || (k + 1 < n && p[k + 1] == p[k])),
                  "torch.linalg.ldl_solve: expected pivots as torch.linalg.ldl_factor writes them (each a row "
                  "between 1 and ",
                  n, ", a 2x2 block's two entries equal and negative), but got ", p[k], " at position ", k,
                  pair && k + 1 < n ? " followed by " + std::to_string(p[k + 1]) : std::string(), " of matrix ", b);
      k += pair ? 2 : 1;
    }
  }
}

// A device tensor holding a host result, in the result's own layout (LAPACK's column-major matrices).
Tensor onDevice(const Tensor& host, const Tensor& like) {
  Tensor t = at::empty_strided(host.sizes(), host.strides(), like.options().dtype(host.scalar_type()));
  hostView(t).copy_(host);
  return t;
}

// Swaps two equally shaped views' contents.
void swapViews(const Tensor& x, const Tensor& y) {
  const Tensor t = x.clone();
  x.copy_(y);
  y.copy_(t);
}

// The largest |v_i| and the first i where it is (LAPACK's idamax), one host read.
std::pair<double, int64_t> absMax(const Tensor& v) {
  const Tensor av = v.abs();
  const Tensor both = at::stack({av.max().to(at::kDouble), av.argmax().to(at::kDouble)}).cpu();
  return {both[0].item<double>(), static_cast<int64_t>(both[1].item<double>())};
}

// Bunch-Kaufman on one n x n matrix `a` (the working copy, lower triangle read), in place; the pivots and info.
int32_t factor(Tensor& a, std::vector<int32_t>& piv) {
  const int64_t n = a.size(0);
  const double alpha = (1.0 + std::sqrt(17.0)) / 8.0;
  int32_t info = 0;
  for (int64_t k = 0; k < n;) {
    int64_t kstep = 1, kp = k;
    const double absakk = std::abs(a[k][k].item<double>());
    double colmax = 0;
    int64_t imax = k;
    if (k + 1 < n) {
      const auto [m, i] = absMax(a.select(1, k).narrow(0, k + 1, n - k - 1));
      colmax = m;
      imax = k + 1 + i;
    }
    if (std::max(absakk, colmax) == 0.0 || std::isnan(absakk)) { // a zero (or NaN) column: recorded, skipped
      if (info == 0) info = static_cast<int32_t>(k + 1);
      piv[k] = static_cast<int32_t>(k + 1);
      k += 1;
      continue;
    }
    if (absakk < alpha * colmax) {
      double rowmax = absMax(a.select(0, imax).narrow(0, k, imax - k)).first; // row imax, left of the diagonal
      if (imax + 1 < n) rowmax = std::max(rowmax, absMax(a.select(1, imax).narrow(0, imax + 1, n - imax - 1)).first);
      if (absakk >= alpha * colmax * (colmax / rowmax)) {
        kp = k;
      } else if (std::abs(a[imax][imax].item<double>()) >= alpha * rowmax) {
        kp = imax;
      } else {
        kp = imax;
        kstep = 2;
      }
    }
    const int64_t kk = k + kstep - 1;
    if (kp != kk) { // the symmetric interchange of rows and columns kk and kp of the trailing block (lower part)
      if (kp + 1 < n)
        swapViews(a.select(1, kk).narrow(0, kp + 1, n - kp - 1), a.select(1, kp).narrow(0, kp + 1, n - kp - 1));
      if (kp - kk - 1 > 0)
        swapViews(a.select(1, kk).narrow(0, kk + 1, kp - kk - 1), a.select(0, kp).narrow(0, kk + 1, kp - kk - 1));
      swapViews(a[kk][kk], a[kp][kp]);
      if (kstep == 2) swapViews(a[k + 1][k], a[kp][k]);
    }
    const int64_t rest = n - k - kstep;
    if (kstep == 1) {
      if (rest > 0) {
        const Tensor r1 = a[k][k].reciprocal();
        const Tensor x = a.select(1, k).narrow(0, k + 1, rest);
        Tensor trailing = a.narrow(0, k + 1, rest).narrow(1, k + 1, rest);
        trailing.add_(at::outer(x, x.mul(r1.neg()))); // sytf2's syr: a_ij += x_i (-x_j / d)
        x.mul_(r1);
      }
      piv[k] = static_cast<int32_t>(kp + 1);
    } else {
      if (rest > 0) {
        const Tensor d21 = a[k + 1][k];
        const Tensor d11 = a[k + 1][k + 1].div(d21), d22 = a[k][k].div(d21);
        const Tensor t = d11.mul(d22).sub(1).reciprocal();
        const Tensor s = t.div(d21);
        const Tensor ck = a.select(1, k).narrow(0, k + 2, rest), ck1 = a.select(1, k + 1).narrow(0, k + 2, rest);
        const Tensor wk = s.mul(d11.mul(ck).sub(ck1)), wkp1 = s.mul(d22.mul(ck1).sub(ck));
        Tensor trailing = a.narrow(0, k + 2, rest).narrow(1, k + 2, rest);
        trailing.sub_(at::outer(ck, wk)).sub_(at::outer(ck1, wkp1));
        ck.copy_(wk);
        ck1.copy_(wkp1);
      }
      piv[k] = piv[k + 1] = static_cast<int32_t>(-(kp + 1));
    }
    k += kstep;
  }
  return info;
}

// Solves A X = B in place for one matrix from factor()'s LD and pivots (sytrs, lower).
void solve(const Tensor& ld, const std::vector<int32_t>& piv, Tensor& b) {
  const int64_t n = ld.size(0);
  auto row = [&](int64_t i) { return b.select(0, i); };
  auto swapRows = [&](int64_t i, int64_t j) {
    if (i != j) swapViews(row(i), row(j));
  };
  for (int64_t k = 0; k < n;) { // L D Y = P^T B, forwards
    if (piv[k] > 0) {
      swapRows(k, piv[k] - 1);
      if (k + 1 < n) b.narrow(0, k + 1, n - k - 1).sub_(at::outer(ld.select(1, k).narrow(0, k + 1, n - k - 1), row(k)));
      row(k).div_(ld[k][k]);
      k += 1;
    } else {
      swapRows(k + 1, -piv[k] - 1);
      if (k + 2 < n) {
        Tensor below = b.narrow(0, k + 2, n - k - 2);
        below.sub_(at::outer(ld.select(1, k).narrow(0, k + 2, n - k - 2), row(k)));
        below.sub_(at::outer(ld.select(1, k + 1).narrow(0, k + 2, n - k - 2), row(k + 1)));
      }
      const Tensor akm1k = ld[k + 1][k];
      const Tensor akm1 = ld[k][k].div(akm1k), ak = ld[k + 1][k + 1].div(akm1k);
      const Tensor denom = akm1.mul(ak).sub(1);
      const Tensor bkm1 = row(k).div(akm1k), bk = row(k + 1).div(akm1k);
      row(k).copy_(ak.mul(bkm1).sub(bk).div(denom));
      row(k + 1).copy_(akm1.mul(bk).sub(bkm1).div(denom));
      k += 2;
    }
  }
  for (int64_t k = n - 1; k >= 0;) { // L^T P^T X = Y, backwards
    if (piv[k] > 0) {
      if (k + 1 < n)
        row(k).sub_(at::matmul(ld.select(1, k).narrow(0, k + 1, n - k - 1), b.narrow(0, k + 1, n - k - 1)));
      swapRows(k, piv[k] - 1);
      k -= 1;
    } else {
      if (k + 1 < n) {
        const Tensor tail = b.narrow(0, k + 1, n - k - 1);
        row(k).sub_(at::matmul(ld.select(1, k).narrow(0, k + 1, n - k - 1), tail));
        row(k - 1).sub_(at::matmul(ld.select(1, k - 1).narrow(0, k + 1, n - k - 1), tail));
      }
      swapRows(k, -piv[k] - 1);
      k -= 2;
    }
  }
}

using FactorOut = std::tuple<Tensor&, Tensor&, Tensor&>;

FactorOut ldlFactorOut(const Tensor& self, bool hermitian, bool check_errors, Tensor& LD, Tensor& pivots,
                       Tensor& info) {
  if (!ldlDtype(self) || self.dim() < 2)
    return Fallback<at::_ops::linalg_ldl_factor_ex_out>::call(self, hermitian, check_errors, LD, pivots, info);
  at::native::squareCheckInputs(self, "torch.linalg.ldl_factor_ex");
  at::native::checkSameDevice("torch.linalg.ldl_factor_ex", LD, self, "LD");
  at::native::checkSameDevice("torch.linalg.ldl_factor_ex", pivots, self, "pivots");
  at::native::checkSameDevice("torch.linalg.ldl_factor_ex", info, self, "info");
  const int64_t n = self.size(-1);
  const std::vector<int64_t> batch(self.sizes().begin(), self.sizes().end() - 2);
  std::vector<int64_t> piv_shape = batch;
  piv_shape.push_back(n);
  const auto int_opts = at::TensorOptions().dtype(at::kInt);
  if (self.numel() == 0) {
    assignExactOut(LD, self.clone(at::MemoryFormat::Contiguous));
    assignExactOut(pivots, at::zeros(piv_shape, self.options().dtype(at::kInt)));
    assignExactOut(info, at::zeros(batch, self.options().dtype(at::kInt)));
    return {LD, pivots, info};
  }
  if (simHostRoute(HostRoute::Solver)) {
    auto r = at::linalg_ldl_factor_ex(hostView(self), hermitian, false);
    assignExactOut(LD, onDevice(std::get<0>(r), self));
    assignExactOut(pivots, onDevice(std::get<1>(r), self));
    assignExactOut(info, onDevice(std::get<2>(r), self));
    if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", self.dim() == 2);
    return {LD, pivots, info};
  }
  // float32 is factored in float64 and rounded once: its float32 steps left solutions of ill-conditioned systems up
  // to 4x farther from float64 than the CPU's; the pivot tests can then differ from the CPU's only in near-ties
  const Tensor work = self.reshape({-1, n, n}).tril().to(at::kDouble).contiguous();
  const int64_t count = work.size(0);
  std::vector<int32_t> all_piv(static_cast<size_t>(count * n)), infos(static_cast<size_t>(count));
  for (int64_t b = 0; b < count; ++b) {
    std::vector<int32_t> piv(static_cast<size_t>(n));
    Tensor a = work[b];
    infos[b] = factor(a, piv);
    std::copy(piv.begin(), piv.end(), all_piv.begin() + b * n);
  }
  assignExactOut(LD, work.tril().view(self.sizes()).to(self.scalar_type()));
  assignExactOut(pivots, at::tensor(all_piv, int_opts).view(piv_shape).to(self.device()));
  assignExactOut(info, at::tensor(infos, int_opts).view(batch).to(self.device()));
  if (check_errors) at::_linalg_check_errors(info, "torch.linalg.ldl_factor_ex", self.dim() == 2);
  return {LD, pivots, info};
}

Tensor& ldlSolveOut(const Tensor& LD, const Tensor& pivots, const Tensor& B, bool hermitian, Tensor& out) {
  if (!ldlDtype(LD) || B.scalar_type() != LD.scalar_type() || LD.dim() < 2 || B.dim() < 2 ||
      pivots.scalar_type() != at::kInt || pivots.dim() != LD.dim() - 1 || LD.size(-1) != LD.size(-2) ||
      pivots.size(-1) != LD.size(-1) || B.size(-2) != LD.size(-1) ||
      LD.sizes().slice(0, LD.dim() - 2) !=
          pivots.sizes().slice(0, pivots.dim() - 1)) // ATen's checks and messages: the CPU's kernel
    return Fallback<at::_ops::linalg_ldl_solve_out>::call(LD, pivots, B, hermitian, out);
  at::native::checkSameDevice("torch.linalg.ldl_solve", B, LD, "B");
  at::native::checkSameDevice("torch.linalg.ldl_solve", pivots, LD, "pivots");
  at::native::checkSameDevice("torch.linalg.ldl_solve", out, LD, "result");
  const int64_t n = LD.size(-1);
  auto [b_shape, ld_shape] = at::native::_linalg_broadcast_batch_dims(B, LD);
  std::vector<int64_t> piv_shape(ld_shape.begin(), ld_shape.end() - 1);
  if (B.numel() == 0 || n == 0) return assignExactOut(out, B.expand(b_shape).clone(at::MemoryFormat::Contiguous));
  if (simHostRoute(HostRoute::Solver)) {
    // every operand at the broadcast batch shape: ATen's CPU kernel expands B's batch but not the pivots (sytrs then
    // reads past them, a segmentation fault: test_ldl_matches_the_cpu)
    const Tensor piv = pivots.expand(piv_shape).contiguous();
    checkPivots(piv.reshape({-1, n}), n);
    const Tensor x =
        at::linalg_ldl_solve(hostView(LD).expand(ld_shape), hostView(piv), hostView(B).expand(b_shape), hermitian);
    return assignExactOut(out, onDevice(x, B));
  }
  // float32 systems are solved in float64 and rounded once, as they are factored
  const Tensor ld = LD.expand(ld_shape).reshape({-1, n, n}).to(at::kDouble);
  const Tensor pv = pivots.expand(piv_shape).reshape({-1, n}).cpu();
  Tensor x = B.expand(b_shape).reshape({-1, n, B.size(-1)}).to(at::kDouble).clone(at::MemoryFormat::Contiguous);
  for (int64_t b = 0; b < x.size(0); ++b) {
    const Tensor pb = pv[b].contiguous();
    const int32_t* p = pb.data_ptr<int32_t>();
    const std::vector<int32_t> piv(p, p + n);
    Tensor xb = x[b];
    solve(ld[b], piv, xb);
  }
  return assignExactOut(out, x.view(b_shape).to(B.scalar_type()));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "linalg_ldl_factor_ex.out", ldlFactorOut);
  MT_IMPL(m, "linalg_ldl_solve.out", ldlSolveOut);
}

} // namespace mytorch
