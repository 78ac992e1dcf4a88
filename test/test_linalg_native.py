"""The dense solver family (Note [Dense solver family] in kernels/include/mytorch/solver.h; csrc/aten/linalg/LinalgLu.cpp,
LinalgDecompositions.cpp): torch.linalg's LU, solve, inverse, determinants, Cholesky, eigh and SVD with the fallback
forbidden, against the CPU (float64 as the gold). On sim the primitives are torch's CPU LAPACK; on the emulated
build the cuSOLVER calls of a GPU, answered by the emulated library's reference factorizations, so everything the
glue composes around them (transposes, pivots, batches, broadcasting, info) is checked there too. Eigen- and
singular vectors are unique only up to a unit factor per column: they are checked by reconstruction and
orthonormality, each against the CPU's own error."""

import os

import pytest
import torch

import mytorch

from mytorch.testing._compare import assert_aligned, misalignment

pytestmark = [pytest.mark.native, pytest.mark.every_runtime]

g = torch.Generator().manual_seed(31)
DTYPES = [torch.float32, torch.float64, torch.complex64, torch.complex128]


def _rand(*shape, dtype=torch.float64):
    x = torch.randn(*shape, generator=g, dtype=torch.float64)
    if dtype.is_complex:
        x = torch.complex(x, torch.randn(*shape, generator=g, dtype=torch.float64))
    return x.to(dtype)


def _gold_dtype(dtype):
    return torch.complex128 if dtype.is_complex else torch.float64


def _compare(fn, *args, what):
    """fn on mytorch against the CPU (float64 as the gold), output by output: the problems found."""
    ref = fn(*args)
    dev = fn(*[a.to("mytorch") if isinstance(a, torch.Tensor) else a for a in args])
    gold = fn(
        *[
            a.to(_gold_dtype(a.dtype))
            if isinstance(a, torch.Tensor) and a.is_floating_point() or isinstance(a, torch.Tensor) and a.is_complex()
            else a
            for a in args
        ]
    )
    refs, devs, golds = [x if isinstance(x, (tuple, list)) else (x,) for x in (ref, dev, gold)]
    problems = []
    for i, (d, r, gd) in enumerate(zip(devs, refs, golds)):
        if d.device.type != "mytorch" or d.dtype != r.dtype or d.shape != r.shape:
            problems.append(f"{what}[{i}]: {d.device} {d.dtype} {tuple(d.shape)}, CPU {r.dtype} {tuple(r.shape)}")
        elif not (r.dtype.is_floating_point or r.dtype.is_complex):
            if not torch.equal(d.cpu(), r):
                problems.append(f"{what}[{i}]: {d.cpu().tolist()} != CPU {r.tolist()}")
        else:
            p = misalignment(d, r, gd.to(torch.complex128 if r.is_complex() else torch.float64), f"{what}[{i}]")
            if p:
                problems.append(p)
    return problems


def _vectors_problems(dev_parts, ref_parts, A, recon, what, unitary):
    """Vectors checked by reconstruction (recon(parts) == A) and orthonormality of each unitary factor, the
    mytorch result's error against the CPU's own (the one tolerance rule)."""
    gold = A.to(_gold_dtype(A.dtype))
    problems = []
    p = misalignment(recon(*[t.cpu() for t in dev_parts]), recon(*ref_parts), gold, f"{what} reconstruction")
    if p:
        problems.append(p)
    for i in unitary:
        dd, rr = dev_parts[i].cpu(), ref_parts[i]
        if dd.shape[-1] > 1:
            gram_d = dd.mH @ dd if dd.shape[-2] >= dd.shape[-1] else dd @ dd.mH
            gram_r = rr.mH @ rr if rr.shape[-2] >= rr.shape[-1] else rr @ rr.mH
            eye = torch.eye(gram_r.shape[-1], dtype=_gold_dtype(A.dtype)).expand(gram_r.shape)
            p = misalignment(gram_d, gram_r, eye, f"{what} factor {i} orthonormality")
            if p:
                problems.append(p)
    return problems


@pytest.mark.parametrize("dtype", DTYPES)
def test_lu_family_matches_the_cpu(dtype):
    for shape in [(5, 5), (3, 6, 4), (2, 4, 7), (0, 3, 3), (1, 1)]:
        A = _rand(*shape, dtype=dtype)
        assert not _compare(lambda a: torch.linalg.lu_factor_ex(a), A, what=f"lu_factor_ex {shape}")
        assert not _compare(lambda a: torch.linalg.lu(a), A, what=f"lu {shape}")
        LU, piv = torch.linalg.lu_factor(A) if shape[-1] == shape[-2] else (None, None)
        if LU is not None:
            assert not _compare(lambda lu, p: torch.lu_unpack(lu, p), LU, piv, what=f"lu_unpack {shape}")
    A = _rand(3, 4, 4, dtype=dtype)
    LU, piv = torch.linalg.lu_factor(A)
    for left in (True, False):
        for adjoint in (False, True):
            B = _rand(3, 4, 2, dtype=dtype) if left else _rand(3, 2, 4, dtype=dtype)
            what = f"lu_solve left={left} adjoint={adjoint}"
            assert not _compare(
                lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, left=left, adjoint=adjoint), LU, piv, B, what=what
            )
    # broadcasting: one factorisation against a batch of right-hand sides
    assert not _compare(
        lambda lu, p, b: torch.linalg.lu_solve(lu, p, b),
        LU[0],
        piv[0],
        _rand(2, 3, 4, 3, dtype=dtype),
        what="lu_solve broadcast",
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_solve_inverse_and_determinants_match_the_cpu(dtype):
    A = _rand(3, 5, 5, dtype=dtype)
    assert not _compare(lambda a, b: torch.linalg.solve(a, b), A, _rand(3, 5, 2, dtype=dtype), what="solve")
    assert not _compare(lambda a, b: torch.linalg.solve(a, b), A, _rand(3, 5, dtype=dtype), what="solve vector rhs")
    assert not _compare(
        lambda a, b: torch.linalg.solve(a, b, left=False),
        A,
        _rand(2, 5, dtype=dtype).expand(3, 2, 5),
        what="solve left=False",
    )
    assert not _compare(lambda a, b: torch.linalg.solve(a, b), A[0], _rand(4, 5, 1, dtype=dtype), what="solve bcast")
    assert not _compare(lambda a: torch.linalg.inv_ex(a), A, what="inv_ex")
    assert not _compare(lambda a: torch.linalg.inv(a.mT), A, what="inv of a transposed view")
    assert not _compare(lambda a: torch.linalg.det(a), A, what="det")
    assert not _compare(lambda a: torch.linalg.slogdet(a), A, what="slogdet")
    singular = A.clone()
    singular[:, 2] = singular[:, 1]  # two equal rows: det 0 up to rounding
    assert not _compare(lambda a: torch.linalg.det(a), singular, what="det singular")
    zero_column = A.clone()
    zero_column[:, :, 2] = 0  # an exact zero pivot in column 3 whatever the rounding: info 3
    assert not _compare(lambda a: torch.linalg.lu_factor_ex(a), zero_column, what="lu info singular")
    assert not _compare(lambda a: torch.linalg.slogdet(a), zero_column, what="slogdet singular")
    zero = torch.zeros(2, 3, 3, dtype=dtype)
    assert not _compare(lambda a: torch.linalg.slogdet(a), zero, what="slogdet of zeros")
    assert not _compare(lambda a: torch.linalg.inv_ex(a)[1], zero, what="inv_ex info of zeros")
    with pytest.raises(torch.linalg.LinAlgError) as cpu:
        torch.linalg.inv(zero)
    with pytest.raises(torch.linalg.LinAlgError) as dev:
        torch.linalg.inv(zero.to("mytorch"))
    assert str(dev.value) == str(cpu.value)


def _hermitian_pd(n, batch, dtype):
    X = _rand(*batch, n, n, dtype=dtype)
    return X @ X.mH + n * torch.eye(n, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_cholesky_family_matches_the_cpu(dtype):
    A = _hermitian_pd(5, (3,), dtype)
    for upper in (False, True):
        assert not _compare(lambda a: torch.linalg.cholesky_ex(a, upper=upper), A, what=f"cholesky_ex upper={upper}")
        L = torch.linalg.cholesky(A, upper=upper)
        assert not _compare(lambda f: torch.cholesky_inverse(f, upper=upper), L, what=f"cholesky_inverse {upper}")
        assert not _compare(
            lambda b, f: torch.cholesky_solve(b, f, upper=upper),
            _rand(3, 5, 2, dtype=dtype),
            L,
            what=f"cholesky_solve upper={upper}",
        )
    assert not _compare(lambda a: torch.cholesky(a), A, what="torch.cholesky (deprecated)")
    bad = A.clone()
    bad[1, 3, 3] = -100  # the leading minor of order 4 of matrix 1 is not positive definite
    assert not _compare(lambda a: torch.linalg.cholesky_ex(a)[1], bad, what="cholesky_ex info")
    with pytest.raises(torch.linalg.LinAlgError) as cpu:
        torch.linalg.cholesky(bad)
    with pytest.raises(torch.linalg.LinAlgError) as dev:
        torch.linalg.cholesky(bad.to("mytorch"))
    assert str(dev.value) == str(cpu.value)
    singular_factor = torch.linalg.cholesky(A[0]).clone()
    singular_factor[2, 2] = 0
    with pytest.raises(torch.linalg.LinAlgError) as cpu:
        torch.cholesky_inverse(singular_factor)
    with pytest.raises(torch.linalg.LinAlgError) as dev:
        torch.cholesky_inverse(singular_factor.to("mytorch"))
    assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_eigh_matches_the_cpu(dtype):
    H = _rand(3, 6, 6, dtype=dtype)
    H = H + H.mH
    for uplo in ("L", "U"):
        # only the named triangle is read: garbage in the other must not matter
        noisy = H.clone()
        mask = (
            torch.ones(6, 6, dtype=torch.bool).triu(1) if uplo == "L" else torch.ones(6, 6, dtype=torch.bool).tril(-1)
        )
        noisy[:, mask] = 1e3
        assert not _compare(lambda a: torch.linalg.eigvalsh(a, UPLO=uplo), noisy, what=f"eigvalsh {uplo}")
        w_ref, V_ref = torch.linalg.eigh(noisy, UPLO=uplo)
        w, V = torch.linalg.eigh(noisy.to("mytorch"), UPLO=uplo)
        assert not misalignment(w, w_ref, torch.linalg.eigvalsh(noisy.to(_gold_dtype(dtype)), UPLO=uplo), "eigh w")
        assert not _vectors_problems(
            (w, V),
            (w_ref, V_ref),
            H,
            lambda w_, V_: (V_ * w_.to(V_.dtype).unsqueeze(-2)) @ V_.mH,
            f"eigh {uplo}",
            unitary=(1,),
        )
    assert not _compare(lambda a: torch.linalg.eigvalsh(a), torch.zeros(0, 4, 4, dtype=dtype), what="eigvalsh empty")


@pytest.mark.parametrize("dtype", DTYPES)
def test_svd_matches_the_cpu(dtype):
    for shape in [(5, 5), (2, 7, 4), (3, 4, 7), (6, 1)]:
        A = _rand(*shape, dtype=dtype)
        assert not _compare(lambda a: torch.linalg.svdvals(a), A, what=f"svdvals {shape}")
        for full in (False, True):
            U_ref, S_ref, Vh_ref = torch.linalg.svd(A, full_matrices=full)
            U, S, Vh = torch.linalg.svd(A.to("mytorch"), full_matrices=full)
            assert (U.shape, S.shape, Vh.shape) == (U_ref.shape, S_ref.shape, Vh_ref.shape)
            assert not misalignment(S, S_ref, torch.linalg.svdvals(A.to(_gold_dtype(dtype))), f"svd S {shape}")
            k = S_ref.shape[-1]

            def recon(U_, S_, Vh_):
                return (U_[..., :k] * S_.to(U_.dtype).unsqueeze(-2)) @ Vh_[..., :k, :]

            assert not _vectors_problems(
                (U, S, Vh), (U_ref, S_ref, Vh_ref), A, recon, f"svd {shape} full={full}", unitary=(0, 2)
            )
    for shape in [(0, 3), (3, 0)]:  # empty: identities as the valid full factors
        assert not _compare(
            lambda a: torch.linalg.svd(a, full_matrices=True), _rand(*shape, dtype=dtype), what=f"svd empty {shape}"
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_family_matches_the_cpu(dtype):
    """Householder QR has one answer given LAPACK's reflector convention (larfg's beta = -sign(Re a) |(a, x)|), which
    cuSOLVER and the emulated library follow too: Q, R, the reflectors and tau are compared directly."""
    for shape in [(5, 3), (2, 4, 4), (3, 2, 5), (0, 3)]:
        A = _rand(*shape, dtype=dtype)
        assert not _compare(lambda a: torch.geqrf(a), A, what=f"geqrf {shape}")
        for mode in ("reduced", "complete", "r"):
            assert not _compare(lambda a: torch.linalg.qr(a, mode=mode), A, what=f"qr {shape} {mode}")
    A = _rand(2, 6, 4, dtype=dtype)
    refl, tau = torch.geqrf(A)
    assert not _compare(lambda a, t: torch.linalg.householder_product(a, t), refl, tau, what="householder_product")
    assert not _compare(lambda a, t: torch.linalg.householder_product(a, t), refl, tau[:, :2], what="hh k < n")
    for left in (True, False):
        for transpose in (False, True):
            C = _rand(2, 6, 3, dtype=dtype) if left else _rand(2, 3, 6, dtype=dtype)
            assert not _compare(
                lambda a, t, c: torch.ormqr(a, t, c, left, transpose),
                refl,
                tau,
                C,
                what=f"ormqr left={left} transpose={transpose}",
            )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_triangular_solve_matches_the_cpu(dtype):
    A = _rand(2, 4, 4, dtype=dtype) + 4 * torch.eye(4, dtype=dtype)
    B = _rand(3, 1, 4, 2, dtype=dtype)
    for upper in (True, False):
        for transpose in (False, True):
            for unit in (False, True):
                what = f"triangular_solve upper={upper} transpose={transpose} unit={unit}"
                assert not _compare(lambda b, a: torch.triangular_solve(b, a, upper, transpose, unit), B, A, what=what)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matrix_exp_matches_the_cpu(dtype):
    """Note [Matrix exponential]: a batch of norms from 1e-4 to ~50 (no halving to six squarings, each matrix its
    own count), 0x0 and 1x1, a NaN matrix beside finite ones, and the gradient (the exponential of a block matrix)."""
    A = _rand(6, 5, 5, dtype=dtype) * torch.tensor([1e-4, 0.05, 0.5, 1.5, 4.0, 8.0], dtype=dtype).view(6, 1, 1)
    assert not _compare(torch.linalg.matrix_exp, A, what="matrix_exp")
    for n in (0, 1):
        assert not _compare(torch.linalg.matrix_exp, _rand(2, n, n, dtype=dtype), what=f"matrix_exp {n}x{n}")
    bad = A[:3].clone()
    bad[1, 2, 3] = float("nan")
    assert not _compare(torch.linalg.matrix_exp, bad, what="matrix_exp with a NaN matrix")
    B, G = _rand(3, 4, 4, dtype=dtype), _rand(3, 4, 4, dtype=dtype)

    def grad(a, gout):
        a = a.detach().requires_grad_()
        return torch.autograd.grad(torch.linalg.matrix_exp(a), a, gout)[0]

    assert not _compare(grad, B, G, what="matrix_exp gradient")
    with pytest.raises(RuntimeError, match="square"):
        torch.linalg.matrix_exp(_rand(2, 3, dtype=dtype).to("mytorch"))


@pytest.mark.parametrize("dtype", DTYPES)
def test_lstsq_matches_the_cpu(dtype):
    """Note [Least squares]: every driver on tall, wide, square and empty matrices, a rank-deficient batch (the
    minimum-norm solution and the rank), vector and broadcast right-hand sides, rcond, the gradient, and ATen's
    refusals with its messages (gels's refusal of a zero column, batched and not, included)."""
    for m, n in [(6, 4), (4, 6), (5, 5), (0, 3), (3, 0)]:
        A, B = _rand(2, m, n, dtype=dtype), _rand(2, m, 3, dtype=dtype)
        for driver in ("gels", "gelsy", "gelsd", "gelss", None):
            what = f"lstsq {m}x{n} {driver}"
            assert not _compare(lambda a, b: torch.linalg.lstsq(a, b, driver=driver), A, B, what=what)
    A = _rand(3, 7, 4, dtype=dtype)
    A[1, :, 3] = A[1, :, 0] - A[1, :, 1]  # rank 3
    for driver in ("gelsy", "gelsd", "gelss"):
        assert not _compare(
            lambda a, b: torch.linalg.lstsq(a, b, driver=driver),
            A,
            _rand(3, 7, 2, dtype=dtype),
            what=f"lstsq rank-deficient {driver}",
        )
    assert not _compare(
        lambda a, b: torch.linalg.lstsq(a, b, rcond=0.5, driver="gelsd"),
        A,
        _rand(7, 2, dtype=dtype).expand(3, 7, 2),
        what="lstsq rcond",
    )
    assert not _compare(torch.linalg.lstsq, A, _rand(3, 7, dtype=dtype), what="lstsq vector")
    assert not _compare(
        lambda a, b: torch.linalg.lstsq(a, b, driver="gels"), A[0], _rand(7, dtype=dtype), what="lstsq one vector"
    )
    for driver in ("gelsd", "gels"):
        assert not _compare(
            lambda a, b: torch.linalg.lstsq(a, b, driver=driver),
            A[:1],
            _rand(4, 7, 2, dtype=dtype),
            what=f"lstsq broadcast {driver}",
        )
    G = _rand(3, 4, 2, dtype=dtype)

    def grads(a, b, g):
        a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
        return torch.autograd.grad(torch.linalg.lstsq(a, b).solution, (a, b), g)

    assert not _compare(grads, _rand(3, 7, 4, dtype=dtype), _rand(3, 7, 2, dtype=dtype), G, what="lstsq gradient")
    bad = [
        lambda a, b: torch.linalg.lstsq(a, b, driver="gelsx"),
        lambda a, b: torch.linalg.lstsq(a[0, 0], b),
        lambda a, b: torch.linalg.lstsq(a, b[:, :5]),
        lambda a, b: torch.linalg.lstsq(a, b.to(torch.complex128 if dtype != torch.complex128 else torch.complex64)),
        lambda a, b: torch.linalg.lstsq(a[0], b),
    ]
    if not dtype.is_complex:  # gels by QR refuses an exactly zero diagonal of R, as LAPACK's trtrs (real dtypes)
        bad += [
            lambda a, b: torch.linalg.lstsq(a * (torch.arange(4, device=a.device) != 2), b, driver="gels"),
            lambda a, b: torch.linalg.lstsq(a[1] * (torch.arange(4, device=a.device) != 0), b[1], driver="gels"),
        ]
    for call in bad:
        a, b = _rand(3, 7, 4, dtype=dtype), _rand(3, 7, 2, dtype=dtype)
        with pytest.raises(RuntimeError) as cpu:
            call(a, b)
        with pytest.raises(RuntimeError) as dev:
            call(a.to("mytorch"), b.to("mytorch"))
        assert str(dev.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ldl_matches_the_cpu(dtype):
    """Note [LDL]: Bunch-Kaufman with LAPACK's pivots (1x1 and 2x2 blocks, interchanges), batches, a singular
    matrix (info, the zero column skipped), empty ones, and ldl_solve with broadcast batches; pivots and info
    equal to the CPU's, LD and the solutions aligned."""
    cases = []
    for shape in [(5, 5), (3, 6, 6), (2, 2, 9, 9), (1, 1), (0, 0), (2, 0, 0), (17, 17)]:
        A = _rand(*shape, dtype=dtype)
        cases.append(A + A.mT)
    small = cases[0].clone()
    small[0, 0] = 1e-3  # a tiny first pivot: a 2x2 block or an interchange
    singular = torch.zeros(4, 4, dtype=dtype)
    singular[1, 1], singular[2, 3], singular[3, 2] = 2.0, 1.0, 1.0
    cases += [small, singular]
    for A in cases:
        what = f"ldl_factor {tuple(A.shape)}"
        assert not _compare(torch.linalg.ldl_factor_ex, A, what=what)
        if A.numel() == 0 or A[..., 0, 0].ne(0).all():
            B = _rand(*A.shape[:-1], 3, dtype=dtype)
            assert not _compare(
                lambda a, b: torch.linalg.ldl_solve(*torch.linalg.ldl_factor(a), b), A, B, what=what + " solve"
            )
    # B with more batch dimensions than LD: broadcast. (PyTorch's CPU ldl_solve crashes on this -- a segmentation
    # fault in LAPACK's sytrs, its pivots not expanded -- so its reference is the call with LD and pivots expanded.)
    LD, piv = torch.linalg.ldl_factor(cases[1])
    B = _rand(4, 3, 6, 2, dtype=dtype)
    ref = torch.linalg.ldl_solve(LD.expand(4, 3, 6, 6), piv.expand(4, 3, 6), B)
    gold = torch.linalg.ldl_solve(LD.double().expand(4, 3, 6, 6), piv.expand(4, 3, 6), B.double())
    out = torch.linalg.ldl_solve(LD.to("mytorch"), piv.to("mytorch"), B.to("mytorch"))
    assert not misalignment(out, ref, gold, "ldl_solve broadcast")
    # pivots that no factorization wrote: a row out of range raises (sytrs on the sim's host route would read outside
    # the matrix; the composition's row select raises too), and on sim a 2x2 block's entries that differ
    bad = piv.clone()
    bad[0, 0] = 7
    with pytest.raises((RuntimeError, IndexError)):
        torch.linalg.ldl_solve(LD.to("mytorch"), bad.to("mytorch"), B[0].to("mytorch"))
    if torch.mytorch.runtime() == "sim":
        bad = piv.clone()
        bad[0, :2] = torch.tensor([-2, -3])
        with pytest.raises(RuntimeError, match="2x2 block's two entries equal and negative"):
            torch.linalg.ldl_solve(LD.to("mytorch"), bad.to("mytorch"), B[0].to("mytorch"))


def test_out_variants_and_unsupported_dtypes():
    A = _rand(4, 4)
    LU, piv, info = (
        torch.empty(0, dtype=torch.float64, device="mytorch"),
        torch.empty(0, dtype=torch.int32, device="mytorch"),
        torch.empty(0, dtype=torch.int32, device="mytorch"),
    )
    torch.linalg.lu_factor_ex(A.to("mytorch"), out=(LU, piv, info))
    ref = torch.linalg.lu_factor_ex(A)
    assert not misalignment(LU, ref[0], None, "lu_factor_ex out=") and torch.equal(piv.cpu(), ref[1])
    U, S, Vh = (torch.empty(0, dtype=torch.float64, device="mytorch") for _ in range(3))
    torch.linalg.svd(A.to("mytorch"), out=(U, S, Vh))
    assert not misalignment(S, torch.linalg.svdvals(A), None, "svd out=")
    # half: the CPU refuses it, and so does mytorch (through the counted fallback, with the CPU's message)
    torch.mytorch.set_fallback_mode("silent")
    try:
        with pytest.raises(RuntimeError) as cpu:
            torch.linalg.inv(A.half())
        with pytest.raises(RuntimeError) as dev:
            torch.linalg.inv(A.half().to("mytorch"))
        assert str(dev.value) == str(cpu.value)
    finally:
        torch.mytorch.set_fallback_mode("error")


@pytest.mark.skipif(os.environ.get("MYTORCH_RUNTIME") != "emu", reason="a control of the emulated cuSOLVER")
def test_negative_control_the_triangle_checks_fail_when_the_library_reads_the_other_one():
    """MYTORCH_EMU_CUSOLVER_UPLO=swap makes the emulated potrf and syevd read the other triangle than asked: the
    checks above must then fail (they would pass vacuously if the glue or the library ignored uplo; the matrices'
    other triangles hold values that change the answer)."""
    H = _rand(5, 5, dtype=torch.float64)
    noisy = H + H.mT
    noisy[torch.ones(5, 5, dtype=torch.bool).triu(1)] = 1e3
    os.environ["MYTORCH_EMU_CUSOLVER_UPLO"] = "swap"
    try:
        assert _compare(lambda a: torch.linalg.eigvalsh(a), noisy, what="eigvalsh, library reading the other triangle")
        pd = _hermitian_pd(4, (), torch.float64)
        pd[torch.ones(4, 4, dtype=torch.bool).triu(1)] = 0.5
        assert _compare(lambda a: torch.linalg.cholesky_ex(a), pd, what="cholesky, library reading the other triangle")
    finally:
        del os.environ["MYTORCH_EMU_CUSOLVER_UPLO"]
    assert not _compare(lambda a: torch.linalg.eigvalsh(a), noisy, what="eigvalsh")


def test_meta_results_are_cached_per_argument_metadata():
    """Note [Cached meta results]: the Python meta kernel a composed linalg op needs for ATen's checks and its
    results' layout runs once per key; a repeat takes the cached results, a new shape, layout or argument adds a
    key, and a call that raises stores nothing (ATen's message again on the next)."""
    entries = mytorch._C._meta_cache_entries
    a = torch.randn(23, 7, generator=torch.Generator().manual_seed(7), dtype=torch.float64)  # a shape of its own
    d = a.to("mytorch")
    before = entries()
    q, r = torch.linalg.qr(d)
    first = entries()
    assert first == before + 1
    q2, r2 = torch.linalg.qr(d)  # the same key: no new entry, the same results
    assert entries() == first
    assert torch.equal(q2.cpu(), q.cpu()) and torch.equal(r2.cpu(), r.cpu())
    want = torch.linalg.qr(a)
    for got, ref in zip((q2, r2), want):
        assert got.stride() == ref.stride()
        assert_aligned(got.cpu(), ref, what="qr")
    torch.linalg.qr(d.t())  # another layout: another key
    torch.linalg.qr(d, mode="complete")  # another argument: another key
    assert entries() == first + 2
    bad = torch.randn(3, device="mytorch")
    for _ in range(2):  # not stored: the check runs again
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            torch.linalg.qr(bad)
    assert entries() == first + 2
