// The dense solvers' primitives (Solver.h; Note [Dense solver family]).
#include "csrc/aten/linalg/Solver.h"

#include <ATen/ops/arange.h>
#include <ATen/ops/cholesky_solve.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/geqrf.h>
#include <ATen/ops/linalg_householder_product.h>
#include <ATen/ops/ormqr.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <ATen/ops/linalg_eigh.h>
#include <ATen/ops/linalg_eigvalsh.h>
#include <ATen/ops/linalg_lu_factor_ex.h>
#include <ATen/ops/linalg_lu_solve.h>
#include <ATen/ops/linalg_svd.h>
#include <ATen/ops/linalg_svdvals.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/solver.h"

namespace mytorch::solver {
namespace {

using at::Tensor;

int64_t batchOf(const Tensor& a) {
  int64_t b = 1;
  for (int64_t d = 0; d + 2 < a.dim(); ++d) b *= a.size(d);
  return b;
}

void checkColumnMajor(const Tensor& a, const char* what) {
  TORCH_INTERNAL_ASSERT(a.dim() >= 2 && a.mT().is_contiguous(), "linalg: ", what, " must be column-major");
}

// Queries the workspace, allocates it from the caching allocator on the current stream, runs.
void run(SolverArgs& s, const Tensor& like) {
  c10::DeviceGuard guard(like.device());
  const rt::Stream stream = streamFor(like);
  size_t need = 0;
  s.query = &need;
  MT_RT_CHECK(kernels::solver(s, stream));
  s.query = nullptr;
  Tensor work = at::empty({static_cast<int64_t>(std::max<size_t>(need, 1))}, like.options().dtype(at::kByte));
  s.work = work.data_ptr();
  s.work_bytes = need;
  MT_RT_CHECK(kernels::solver(s, stream));
}

SolverArgs argsFor(SolverOp op, const Tensor& a, Tensor& info) {
  SolverArgs s;
  s.op = op;
  s.dtype = toKernelDType(a.scalar_type());
  s.batch = batchOf(a);
  s.m = a.size(-2);
  s.n = a.size(-1);
  s.a = const_cast<void*>(a.const_data_ptr());
  s.lda = std::max<int64_t>(1, s.m);
  s.a_stride = s.m * s.n;
  TORCH_INTERNAL_ASSERT(info.is_contiguous() && info.scalar_type() == at::kInt && info.numel() == s.batch);
  s.info = info.data_ptr<int32_t>();
  return s;
}

bool empty(const Tensor& a) { return a.numel() == 0; }

// The right-hand side of a solve (getrs, potrs): b, column-major, one n x nrhs block per matrix of the batch.
void setRhs(SolverArgs& s, Tensor& b) {
  TORCH_INTERNAL_ASSERT(batchOf(b) == s.batch && b.size(-2) == s.n);
  s.nrhs = b.size(-1);
  s.b = b.data_ptr();
  s.ldb = std::max<int64_t>(1, s.n);
  s.b_stride = s.n * s.nrhs;
}

} // namespace

bool supported(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kDouble || s == at::kComplexFloat || s == at::kComplexDouble;
}

Tensor columnMajor(const Tensor& a, at::IntArrayRef batch_shape) {
  std::vector<int64_t> shape = batch_shape.empty() ? a.sizes().vec() : batch_shape.vec();
  if (!batch_shape.empty()) shape.insert(shape.end(), {a.size(-2), a.size(-1)});
  std::vector<int64_t> transposed = shape;
  std::swap(transposed[transposed.size() - 1], transposed[transposed.size() - 2]);
  Tensor out = at::empty(transposed, a.options()).mT();
  out.copy_(a.expand(shape));
  return out;
}

Tensor eyeLike(const Tensor& a, at::IntArrayRef batch_shape, int64_t n) {
  std::vector<int64_t> shape = batch_shape.vec();
  shape.insert(shape.end(), {n, n});
  Tensor out = at::empty(shape, a.options()).mT();  // square: the transpose's shape is the same
  out.zero_();
  out.diagonal(0, -2, -1).fill_(1);
  return out;
}

void lu(Tensor& a, Tensor& pivots, Tensor& info, bool pivot) {
  checkColumnMajor(a, "LU's input");
  info.zero_();
  const int64_t k = std::min(a.size(-2), a.size(-1));
  if (empty(a)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor ha = hostView(a);
    auto r = at::linalg_lu_factor_ex(ha, pivot, false);
    ha.copy_(std::get<0>(r));
    hostView(pivots).copy_(std::get<1>(r));
    hostView(info).copy_(std::get<2>(r));
    return;
  }
  Tensor piv64 = at::empty(pivots.sizes(), pivots.options().dtype(at::kLong));
  SolverArgs s = argsFor(SolverOp::Getrf, a, info);
  s.ipiv = pivot ? piv64.data_ptr<int64_t>() : nullptr;
  s.ipiv_stride = k;
  run(s, a);
  if (pivot) pivots.copy_(piv64);
  else pivots.copy_(at::arange(1, k + 1, pivots.options()).expand(pivots.sizes()));
}

void luSolve(const Tensor& lu, const Tensor& pivots, Tensor& b, char trans) {
  checkColumnMajor(lu, "the LU factors");
  checkColumnMajor(b, "the right-hand side");
  if (empty(b) || empty(lu)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor hb = hostView(b);
    const Tensor hl = hostView(lu), hp = hostView(pivots);
    if (trans == 'T' && b.is_complex())  // A^T X = B  <=>  A^H conj(X) = conj(B)
      hb.copy_(at::linalg_lu_solve(hl, hp, hb.conj(), true, true).conj());
    else hb.copy_(at::linalg_lu_solve(hl, hp, hb, true, trans != 'N'));
    return;
  }
  Tensor piv64 = pivots.to(at::kLong).contiguous();
  Tensor info = at::empty({batchOf(lu)}, lu.options().dtype(at::kInt));
  SolverArgs s = argsFor(SolverOp::Getrs, lu, info);
  setRhs(s, b);
  s.ipiv = piv64.data_ptr<int64_t>();
  s.ipiv_stride = s.n;
  s.trans = trans;
  run(s, lu);
}

Tensor permutation(const Tensor& pivots, int64_t m) {
  std::vector<int64_t> shape(pivots.sizes().begin(), pivots.sizes().end() - 1);
  shape.push_back(m);
  Tensor perm = at::arange(m, pivots.options().dtype(at::kLong)).expand(shape).contiguous();
  const int64_t k = pivots.size(-1);
  if (perm.numel() == 0 || k == 0) return perm;
  Tensor piv = pivots.contiguous();
  if (simHostRoute(HostRoute::Solver)) {
    const Tensor hp = hostView(piv);
    Tensor hperm = hostView(perm);
    const int32_t* p = hp.const_data_ptr<int32_t>();
    int64_t* q = hperm.data_ptr<int64_t>();
    for (int64_t b = 0; b < perm.numel() / m; ++b)
      for (int64_t i = 0; i < k; ++i) {
        const int64_t j = p[b * k + i] - 1;
        TORCH_CHECK_INDEX(j >= 0 && j < m, "pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive. ",
                          "Did you pass the pivots returned by torch.linalg.lu_factor? Got pivot: ", j + 1,
                          " at position ", i, " of the matrix ", b, " with LU.size(-2) = ", m);
        std::swap(q[b * m + i], q[b * m + j]);
      }
    return perm;
  }
  PermutationArgs a;
  a.pivots = piv.const_data_ptr<int32_t>();
  a.perm = perm.data_ptr<int64_t>();
  a.batch = perm.numel() / m;
  a.k = k;
  a.m = m;
  c10::DeviceGuard guard(pivots.device());
  MT_RT_CHECK(kernels::lu_permutation(a, streamFor(pivots)));
  return perm;
}

void cholesky(Tensor& a, bool upper, Tensor& info) {
  checkColumnMajor(a, "Cholesky's input");
  info.zero_();
  if (empty(a)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor ha = hostView(a);
    auto r = at::linalg_cholesky_ex(ha, upper, false);
    ha.copy_(std::get<0>(r));
    hostView(info).copy_(std::get<1>(r));
    return;
  }
  SolverArgs s = argsFor(SolverOp::Potrf, a, info);
  s.upper = upper;
  run(s, a);
}

void choleskySolve(const Tensor& factor, Tensor& b, bool upper) {
  checkColumnMajor(factor, "the Cholesky factor");
  checkColumnMajor(b, "the right-hand side");
  if (empty(b) || empty(factor)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor hb = hostView(b);
    hb.copy_(at::cholesky_solve(hb, hostView(factor), upper));
    return;
  }
  Tensor info = at::empty({batchOf(factor)}, factor.options().dtype(at::kInt));
  SolverArgs s = argsFor(SolverOp::Potrs, factor, info);
  setRhs(s, b);
  s.upper = upper;
  run(s, factor);
}

void eigh(Tensor& a, Tensor& w, bool upper, bool vectors, Tensor& info) {
  checkColumnMajor(a, "eigh's input");
  info.zero_();
  if (empty(a)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor ha = hostView(a);
    const char* uplo = upper ? "U" : "L";
    if (vectors) {
      auto r = at::linalg_eigh(ha, uplo);
      hostView(w).copy_(std::get<0>(r));
      ha.copy_(std::get<1>(r));
    } else {
      hostView(w).copy_(at::linalg_eigvalsh(ha, uplo));
    }
    return;
  }
  TORCH_INTERNAL_ASSERT(w.is_contiguous());
  SolverArgs s = argsFor(SolverOp::Syevd, a, info);
  s.w = w.data_ptr();
  s.w_stride = s.n;
  s.upper = upper;
  s.vectors = vectors;
  run(s, a);
}

void svd(Tensor& a, Tensor& s_out, Tensor& u, Tensor& vh, char job, Tensor& info) {
  checkColumnMajor(a, "the SVD's input");
  TORCH_INTERNAL_ASSERT(onSim() || a.size(-2) >= a.size(-1));
  info.zero_();
  if (empty(a)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor ha = hostView(a);
    if (job == 'N') {
      hostView(s_out).copy_(at::linalg_svdvals(ha));
    } else {
      auto r = at::linalg_svd(ha, job == 'A');
      hostView(u).copy_(std::get<0>(r));
      hostView(s_out).copy_(std::get<1>(r));
      hostView(vh).copy_(std::get<2>(r));
    }
    return;
  }
  TORCH_INTERNAL_ASSERT(s_out.is_contiguous());
  SolverArgs s = argsFor(SolverOp::Gesvd, a, info);
  s.w = s_out.data_ptr();
  s.w_stride = s.n;
  s.job = job;
  if (job != 'N') {
    checkColumnMajor(u, "U");
    checkColumnMajor(vh, "Vh");
    s.u = u.data_ptr();
    s.ldu = std::max<int64_t>(1, s.m);
    s.u_stride = u.size(-2) * u.size(-1);
    s.vt = vh.data_ptr();
    s.ldvt = std::max<int64_t>(1, s.n);
    s.vt_stride = s.n * s.n;
  }
  run(s, a);
}

void geqrf(Tensor& a, Tensor& tau) {
  checkColumnMajor(a, "geqrf's input");
  if (empty(a)) return;
  if (simHostRoute(HostRoute::Solver)) {
    Tensor ha = hostView(a);
    auto r = at::geqrf(ha);
    ha.copy_(std::get<0>(r));
    hostView(tau).copy_(std::get<1>(r));
    return;
  }
  TORCH_INTERNAL_ASSERT(tau.is_contiguous());
  Tensor info = at::empty({batchOf(a)}, a.options().dtype(at::kInt));
  SolverArgs s = argsFor(SolverOp::Geqrf, a, info);
  s.tau = tau.data_ptr();
  s.tau_stride = tau.size(-1);
  run(s, a);
}

void orgqr(Tensor& a, const Tensor& tau) {
  checkColumnMajor(a, "orgqr's input");
  if (empty(a)) return;
  const Tensor t = tau.contiguous();
  if (simHostRoute(HostRoute::Solver)) {
    Tensor ha = hostView(a);
    ha.copy_(at::linalg_householder_product(ha, hostView(t)));
    return;
  }
  Tensor info = at::empty({batchOf(a)}, a.options().dtype(at::kInt));
  SolverArgs s = argsFor(SolverOp::Orgqr, a, info);
  s.tau = const_cast<void*>(t.const_data_ptr());
  s.k = t.size(-1);
  s.tau_stride = s.k;
  run(s, a);
}

void ormqr(const Tensor& a, const Tensor& tau, Tensor& c, bool left, bool transpose) {
  checkColumnMajor(a, "the reflectors");
  checkColumnMajor(c, "ormqr's C");
  if (empty(c)) return;
  const Tensor t = tau.contiguous();
  if (simHostRoute(HostRoute::Solver)) {
    Tensor hc = hostView(c);
    hc.copy_(at::ormqr(hostView(a), hostView(t), hc, left, transpose));
    return;
  }
  Tensor info = at::empty({batchOf(c)}, c.options().dtype(at::kInt));
  SolverArgs s = argsFor(SolverOp::Ormqr, c, info);  // m, n: C's
  TORCH_INTERNAL_ASSERT(batchOf(a) == s.batch);
  s.b = c.data_ptr();
  s.ldb = s.lda;
  s.b_stride = s.a_stride;
  s.a = const_cast<void*>(a.const_data_ptr());
  s.lda = std::max<int64_t>(1, a.size(-2));
  s.a_stride = a.size(-2) * a.size(-1);
  s.tau = const_cast<void*>(t.const_data_ptr());
  s.k = t.size(-1);
  s.tau_stride = s.k;
  s.left = left;
  s.trans = transpose ? 'T' : 'N';
  run(s, c);
}

} // namespace mytorch::solver
