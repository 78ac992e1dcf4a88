"""Expert parallelism on mytorch: DeepEP-shaped token dispatch and combine over a process group.

    buf = mytorch.distributed.ep.Buffer(group, max_tokens_per_rank=4096, hidden=7168, num_topk=8,
                                        dtype=torch.bfloat16)
    recv_x, recv_idx, recv_w, handle, event = buf.dispatch(x, topk_idx, topk_weights, num_experts,
                                                           expert_alignment=16)
    y = torch._grouped_mm(recv_x, w1, offs=handle.offsets)        # the local experts, one grouped GEMM
    out, event = buf.combine(y, handle)                           # sum_k w[t, k] * y[row of (t, expert k)]

Note [Expert-parallel dispatch and combine]
A token crosses the wire once per rank that holds one of its experts (not once per expert): the sender packs
one row per (token, destination rank) — the hidden vector, the token's expert ids local to that rank (-1 where
the expert is elsewhere) and its weights — in destination order, token order inside a destination. The receiver
expands the rows into the grouped-GEMM layout: grouped by local expert, rank-major and token order inside an
expert, each expert's block padded to `expert_alignment`; `handle.offsets` are the int32 group ends
torch._grouped_mm takes. Combine is the way back: the receiver sums each received token's expert rows (float32,
in slot order, rounded once: moe_unpermute), sends one partial row per token home, and the home rank adds the
partials of its token in rank order (float32, rounded once). Every sum has a fixed order, so results are
deterministic.

Two modes. "exact": one count exchange (per destination: the tokens, the rows per local expert, the expert
count and an error code), read to the host once — the layer's single host synchronisation, which sizes the
outputs exactly and lets every rank raise the same error when any rank's input is bad. "capacity": every pair
of ranks has `capacity` rows (default max_tokens_per_rank, which drops nothing); sizes are static, counts stay
on the device, tokens past a pair's capacity are dropped (counted in handle.num_dropped) and never written out
of bounds: no host synchronisation (torch.mytorch.set_sync_debug_mode("error") passes).

Transports. Between the processes of one host the rows move through symmetric memory (the symm_mem
all_to_all_vdev kernel: every rank reads its rows from the senders' buffers, counts on the device); across
hosts (or with transport="process-group") through the process group's all_to_all_single (NCCL on GPUs, the
intra-host symmetric-memory path or Gloo on sim). The handle keeps the layout, so combine, the backward passes
and a dispatch with `handle=` reuse it without counting again.

Autograd: dispatch's backward is a combine without weights (and the weights' gradient sent home); combine's
backward is a dispatch of the output gradient through the handle. See docs/expert_parallel.md.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

__all__ = [
    "Buffer",
    "EPHandle",
    "EPWork",
    "moe_experts",
    "shard_experts",
    "experts_forward",
    "quantize_fp8",
    "dequantize_fp8",
    "dispatch_capacity",
    "combine_capacity",
]

_ERRORS = {
    1: "an expert id outside [-1, num_experts)",
    2: "topk_idx / topk_weights / x of mismatched shapes",
    3: "more tokens than the buffer's max_tokens_per_rank",
    4: "a num_experts that differs from rank 0's, is not a multiple of the group size or puts over 256 on a rank",
    5: "x's hidden size or dtype not the buffer's",
}


_ON_COMM = threading.local()  # .active: this thread is running a buffer's communication calls
_MAX_LOCAL_EXPERTS = 256  # the count message's fixed width: ranks that disagree on num_experts still agree on it


def _row_bytes(n: int) -> int:
    return (n + 15) // 16 * 16


@dataclass
class EPHandle:
    """The layout of one dispatch: what combine, the backward passes and a cached dispatch reuse."""

    mode: str
    num_experts: int
    num_local: int
    alignment: int
    tokens: int  # T: this rank's tokens
    dest: torch.Tensor  # [T, K] destination rank of each slot (world where masked)
    send_pos: torch.Tensor  # [T, W] row of (token, rank) in the send layout, -1 if not sent
    send_counts: torch.Tensor  # [W] rows sent to each rank (after the capacity cut)
    recv_counts: torch.Tensor  # [W] rows received from each rank
    recv_rows: int  # N: received rows (exact) or the static bound (capacity)
    slot_rows: torch.Tensor  # [N, K] expert-grouped row of each received (token, slot), -1 masked
    row_gather: torch.Tensor  # [R] received row of each expert-grouped row (B's zero row for padding)
    num_recv_tokens_per_expert: torch.Tensor  # [L] rows per local expert, padded to the alignment
    offsets: torch.Tensor  # [L] int32 group ends, as torch._grouped_mm takes them
    num_recv_tokens_per_expert_list: list | None = None  # exact mode
    num_dropped: torch.Tensor | None = None  # capacity mode: [W] tokens past capacity, per destination
    num_invalid: torch.Tensor | None = None  # ids outside [-1, num_experts): an error in exact mode, dropped here
    send_list: list | None = None  # exact mode, process-group transport: host split sizes
    recv_list: list | None = None
    capacity: int = 0
    send_src: torch.Tensor | None = None  # [rows sent] token * world + destination of each send row
    send_tok: torch.Tensor | None = None  # [rows sent] the token of each send row
    _rows: int = field(default=0, repr=False)  # R
    _expert: torch.Tensor | None = field(default=None, repr=False)  # [R] each row's local expert (recv_topk_idx)
    _weights: torch.Tensor | None = field(default=None, repr=False)  # [R] the weights combine uses by default


class Buffer:
    """Communication buffers for dispatch/combine within `group` (DeepEP's Buffer, mytorch's transports).

    max_tokens_per_rank bounds the tokens a rank dispatches in one call; hidden, num_topk and dtype are the
    token rows'. transport: "auto" (symmetric memory when every rank is on this host, else the process group),
    "symmetric-memory" or "process-group"."""

    def __init__(
        self,
        group=None,
        max_tokens_per_rank: int = 4096,
        hidden: int = 7168,
        num_topk: int = 8,
        dtype: torch.dtype = torch.bfloat16,
        transport: str = "auto",
    ):
        self.group = group if group is not None else dist.group.WORLD
        self.world = dist.get_world_size(self.group)
        self.rank = dist.get_rank(self.group)
        if max_tokens_per_rank < 1 or hidden < 1 or not 1 <= num_topk <= 32:
            raise ValueError(
                f"ep.Buffer: expected max_tokens_per_rank >= 1, hidden >= 1 and 1 <= num_topk <= 32, got "
                f"{max_tokens_per_rank}, {hidden}, {num_topk}"
            )
        if self.world > 32:
            raise ValueError(f"ep.Buffer: at most 32 ranks in an expert-parallel group, got {self.world}")
        self.max_tokens, self.hidden, self.num_topk, self.dtype = max_tokens_per_rank, hidden, num_topk, dtype
        self.device = torch.device("mytorch", torch.mytorch.current_device())
        hosts = [None] * self.world
        dist.all_gather_object(hosts, socket.gethostname(), group=self.group)
        one_host = len(set(hosts)) == 1
        if transport == "auto":
            transport = "symmetric-memory" if one_host and self.world > 1 else "process-group"
        if transport not in ("symmetric-memory", "process-group"):
            raise ValueError(f"ep.Buffer: transport must be auto, symmetric-memory or process-group, got {transport!r}")
        if transport == "symmetric-memory" and not one_host:
            raise ValueError("ep.Buffer: symmetric memory needs every rank of the group on this host")
        self.transport = transport
        esize = torch.empty((), dtype=dtype).element_size()
        # Two planes of rows, each its own buffer so every view is dense: "x" (the hidden vectors, or their
        # gradients and partial sums) and "m" (a dispatched row's K local expert ids and K weights, 32 bits each).
        groups = (hidden + 127) // 128
        self._widths = {"x": _row_bytes(hidden * esize), "x8": _row_bytes(hidden), "m": 8 * num_topk, "s": 4 * groups}
        self._storage = {"x": "x", "x8": "x", "m": "m", "s": "s"}  # FP8 rows share the x plane's memory
        self._rows = self.world * max_tokens_per_rank + 1  # the last row: never written by a transport
        self._a, self._b = {}, {}
        if transport == "symmetric-memory":
            import torch.distributed._symmetric_memory as symm_mem

            self._group_name = self.group.group_name
            make = lambda n: symm_mem.empty(n, dtype=torch.uint8, device=self.device)  # noqa: E731
        else:
            make = lambda n: torch.empty(n, dtype=torch.uint8, device=self.device)  # noqa: E731
        for plane in ("x", "m", "s"):
            n = self._rows * self._widths[plane]
            self._a[plane], self._b[plane] = make(n), make(n)
        if transport == "symmetric-memory":
            self._splits = symm_mem.empty(self.world, dtype=torch.int64, device=self.device)
            for t in (*self._a.values(), *self._b.values(), self._splits):
                symm_mem.rendezvous(t, self._group_name)
        self._so = torch.empty(2, self.world, dtype=torch.int64, device=self.device)
        self._agreed: set = set()  # num_experts values the ranks have agreed on (capacity mode checks once)
        from . import _ep_ops

        self._id = _ep_ops.register(self)  # the custom operators' name for it

    # ---- views of the planes ------------------------------------------------------------------------------------
    def _plane(self, side: dict, plane: str) -> torch.Tensor:
        width = self._widths[plane]
        return side[self._storage[plane]][: self._rows * width].view(self._rows, width)

    def _xrows(self, side: dict, dtype: torch.dtype) -> torch.Tensor:
        """[rows, hidden] of dtype over the x plane (dense when a row is a multiple of 16 bytes)."""
        return self._plane(side, "x8" if dtype == torch.float8_e4m3fn else "x").view(dtype)[:, : self.hidden]

    def _scales(self, side: dict) -> torch.Tensor:
        return self._plane(side, "s").view(torch.float32)

    def _gather(self, rows: torch.Tensor, h: EPHandle) -> torch.Tensor:
        """The expert-grouped rows from B's received rows; padding rows read the last row, zeroed here (no
        transport writes it, but another plane's view of the same memory may have)."""
        rows[-1].zero_()
        return rows.index_select(0, h.row_gather)

    def _meta(self, side: dict) -> torch.Tensor:
        """[rows, 2K] int32 over the m plane: the ids, then the float32 weights' bits."""
        return self._plane(side, "m").view(torch.int32)

    # ---- the transport ----------------------------------------------------------------------------------------
    def _move(self, h: EPHandle, planes: tuple, forward: bool) -> None:
        """Moves the rows written into A's planes (send layout when forward, receive layout when not) to B's (the
        other layout)."""
        in_counts = h.send_counts if forward else h.recv_counts
        if self.transport == "symmetric-memory":
            self._splits.copy_(in_counts)
            for plane in planes:
                a, b = self._plane(self._a, plane), self._plane(self._b, plane)
                torch.ops.symm_mem.all_to_all_vdev(a, b, self._splits, self._so, self._group_name)
            return
        for plane in planes:
            a, b = self._plane(self._a, plane), self._plane(self._b, plane)
            if h.mode == "exact":
                ins, outs = (h.send_list, h.recv_list) if forward else (h.recv_list, h.send_list)
                dist.all_to_all_single(b[: sum(outs)], a[: sum(ins)], outs, ins, group=self.group)
            else:  # capacity rows a pair, fixed places: no host split sizes
                n = self.world * h.capacity
                dist.all_to_all_single(b[:n], a[:n], group=self.group)

    # ---- dispatch -------------------------------------------------------------------------------------------------
    def _check(self, x, topk_idx, topk_weights, num_experts):
        """(error code, detail) of this rank's arguments; 0 when they are good (shape checks only: the ids are
        checked on the device)."""
        if x.dim() != 2 or topk_idx.dim() != 2 or topk_idx.shape[0] != x.shape[0]:
            return 2, f"x {tuple(x.shape)} and topk_idx {tuple(topk_idx.shape)}"
        if topk_idx.shape[1] != self.num_topk or topk_weights.shape != topk_idx.shape:
            return 2, (
                f"topk_idx {tuple(topk_idx.shape)} and topk_weights {tuple(topk_weights.shape)} with the buffer's "
                f"num_topk {self.num_topk}"
            )
        if x.shape[0] > self.max_tokens:
            return 3, f"{x.shape[0]} tokens, max_tokens_per_rank {self.max_tokens}"
        if num_experts < self.world or num_experts % self.world or num_experts // self.world > _MAX_LOCAL_EXPERTS:
            return 4, f"num_experts {num_experts} over {self.world} ranks (at most {_MAX_LOCAL_EXPERTS} a rank)"
        if x.shape[1] != self.hidden or x.dtype not in (self.dtype, torch.float8_e4m3fn):
            return 5, f"x {tuple(x.shape)} {x.dtype}, buffer hidden {self.hidden} {self.dtype}"
        return 0, ""

    def _raise(self, codes, details=""):
        bad = [(r, c) for r, c in enumerate(codes) if c]
        if bad:
            r, c = bad[0]
            mine = f" ({details})" if r == self.rank and details else ""
            raise ValueError(f"ep.dispatch: rank {r} gave {_ERRORS.get(c, f'error {c}')}{mine}")

    def _layout(self, topk_idx, num_experts, mode, alignment, capacity, code, detail) -> EPHandle:
        W, K = self.world, self.num_topk
        T = topk_idx.shape[0] if code == 0 else 0
        L = max(num_experts // W, 1)
        dev = self.device
        idx = topk_idx.to(dev, torch.int64) if code == 0 else torch.zeros(0, K, dtype=torch.int64, device=dev)
        valid = (idx >= 0) & (idx < num_experts)
        invalid = ((idx < -1) | (idx >= num_experts)).sum()
        bad_id = invalid > 0
        dest = torch.where(valid, idx // L, W)
        in_rank = torch.zeros(T, W + 1, dtype=torch.int64, device=dev).scatter_(1, dest, 1)[:, :W].contiguous()
        counts = in_rank.sum(0)
        place = torch.cumsum(in_rank, 0) - in_rank  # a token's place among those sent to the same rank
        h = EPHandle(mode, num_experts, L, alignment, T, dest, None, None, None, 0, None, None, None, None)
        h.num_invalid = invalid
        if mode == "exact":
            # per destination: rows, rows per local expert (fixed width), the expert count, this rank's error code
            F = _MAX_LOCAL_EXPERTS
            msg = torch.zeros(W, F + 3, dtype=torch.int64, device=dev)
            if code == 0:
                per_expert = torch.zeros(W * L + 1, dtype=torch.int64, device=dev)
                per_expert.scatter_add_(0, torch.where(valid, idx, W * L).reshape(-1), torch.ones_like(idx).reshape(-1))
                msg[:, 0] = counts
                msg[:, 1 : L + 1] = per_expert[: W * L].view(W, L)
                msg[:, F + 2] = torch.where(bad_id, 1, 0)
            else:
                msg[:, F + 2] = code
            msg[:, F + 1] = num_experts
            got = torch.empty_like(msg)
            dist.all_to_all_single(got, msg, group=self.group)
            host = torch.cat([got.reshape(-1), counts]).cpu()  # the one host synchronisation of exact mode
            got_h = host[: W * (F + 3)].view(W, F + 3)
            counts_e = got_h[:, F + 1].tolist()  # every rank's num_experts, compared with rank 0's
            codes = [c if c else (0 if e == counts_e[0] else 4) for c, e in zip(got_h[:, F + 2].tolist(), counts_e)]
            if code == 0 and codes[self.rank] == 1:
                detail = "ids outside [-1, %d)" % num_experts
            self._raise(codes, detail)
            h.send_list = host[W * (F + 3) :].tolist()
            h.recv_list = got_h[:, 0].tolist()
            h.send_counts, h.recv_counts = counts, got[:, 0].clone()
            send_off = torch.cumsum(counts, 0) - counts
            h.send_pos = torch.where(in_rank.bool(), send_off + place, -1)
            h.recv_rows = sum(h.recv_list)
            per_local = got_h[:, 1 : L + 1].sum(0)
            h.num_recv_tokens_per_expert_list = [
                (c + alignment - 1) // alignment * alignment for c in per_local.tolist()
            ]
            self._agreed.add(num_experts)
        else:
            if code:
                raise ValueError(f"ep.dispatch: rank {self.rank} gave {_ERRORS[code]} ({detail})")
            if num_experts not in self._agreed:  # once per expert count: the ranks compare it (a host read)
                mine = torch.tensor([num_experts], device=dev)
                every = [torch.empty_like(mine) for _ in range(W)]
                dist.all_gather(every, mine, group=self.group)
                every = torch.cat(every).cpu().tolist()
                codes = [0 if e == every[0] else 4 for e in every]
                self._raise(codes)
                self._agreed.add(num_experts)
            cap = capacity or self.max_tokens
            if not 1 <= cap <= self.max_tokens:
                raise ValueError(f"ep.dispatch: capacity must be in [1, {self.max_tokens}], got {cap}")
            h.capacity = cap
            kept = in_rank.bool() & (place < cap)
            h.num_dropped = (in_rank.bool() & ~kept).sum(0)
            sent = kept.sum(0)
            if self.transport == "symmetric-memory":
                send_off = torch.cumsum(sent, 0) - sent
            else:
                send_off = torch.arange(W, device=dev) * cap
            h.send_pos = torch.where(kept, send_off + place, -1)
            h.send_counts = sent
            if self.transport == "symmetric-memory":
                h.recv_counts = None  # known after the rows move (all_to_all_vdev's output splits)
            else:
                h.recv_counts = torch.empty_like(sent)
                dist.all_to_all_single(h.recv_counts, sent, group=self.group)
            h.recv_rows = W * cap
        return h

    def _expand(self, h: EPHandle, ids: torch.Tensor, w: torch.Tensor, valid_rows: torch.Tensor | None):
        """Received rows' local ids [N, K] -> the expert-grouped layout (slot_rows, row_gather, counts, offsets) and
        each expert-grouped row's local expert and weight. A (row, slot) pair's place inside its expert is its rank
        among the pairs sorted by (expert, row): rank-major and token order, as the rows arrived."""
        L, a, dev = h.num_local, h.alignment, self.device
        N, K = ids.shape
        ok = (ids >= 0) & (ids < L)  # anything else (a masked slot, bytes of a row never sent) is dropped
        if valid_rows is not None:
            ok &= valid_rows.unsqueeze(1)
        e = torch.where(ok, ids, L).long()
        count = torch.zeros(L + 1, dtype=torch.int64, device=dev).scatter_add_(
            0, e.reshape(-1), torch.ones_like(e).reshape(-1)
        )[:L]
        padded = (count + a - 1) // a * a
        start = torch.cumsum(padded, 0) - padded
        first = torch.cumsum(count, 0) - count  # where an expert's pairs begin in the sorted order
        key = e * N + torch.arange(N, device=dev).unsqueeze(1)
        order = torch.sort(key.reshape(-1), stable=True).indices
        place = torch.empty_like(order).scatter_(0, order, torch.arange(N * K, device=dev)).view(N, K)
        ec = e.clamp(max=L - 1)
        slot_rows = torch.where(ok, start[ec] + place - first[ec], -1)
        if h.mode == "exact":
            R = sum(h.num_recv_tokens_per_expert_list)
        else:
            R = N * min(K, L) + L * (a - 1)
        flat = torch.where(ok, slot_rows, R).reshape(-1)
        rows = torch.arange(N, device=dev).unsqueeze(1).expand(N, K).reshape(-1)
        zero_row = self._rows - 1
        row_gather = torch.full((R + 1,), zero_row, dtype=torch.int64, device=dev).scatter_(0, flat, rows)[:R]
        expert = torch.full((R + 1,), -1, dtype=torch.int64, device=dev).scatter_(0, flat, e.reshape(-1))[:R]
        weight = torch.zeros(R + 1, dtype=torch.float32, device=dev).scatter_(0, flat, w.reshape(-1).float())[:R]
        h.slot_rows, h.row_gather, h._rows = slot_rows, row_gather, R
        h.num_recv_tokens_per_expert = padded
        h.offsets = torch.cumsum(padded, 0).to(torch.int32)
        return expert, weight

    def _send_source(self, h: EPHandle) -> tuple:
        """(rows written, each send row's source: token * world + destination) of a layout; computed once."""
        if h.send_src is None:
            T, W = h.tokens, self.world
            n = sum(h.send_list) if h.mode == "exact" else W * h.capacity
            code = torch.arange(T * W, device=self.device).view(T, W)
            flat = torch.where(h.send_pos >= 0, h.send_pos, n).reshape(-1)
            h.send_src = torch.zeros(n + 1, dtype=torch.int64, device=self.device).scatter_(0, flat, code.reshape(-1))[
                :n
            ]
            h.send_tok = h.send_src // W
        return h.send_src.shape[0], h.send_src, h.send_tok

    def _send_tokens(self, h: EPHandle, x: torch.Tensor, meta: tuple | None = None) -> None:
        """Writes x [T, H] (and with meta = (ids, weights) the dispatch metadata) into A's planes in the send
        layout — one gather of the rows each plane sends — and moves them to B."""
        n, src, tok = self._send_source(h)
        planes = ["x"]
        if isinstance(x, tuple):  # FP8 rows and their per-128-channel scales
            x, scales = x
            torch.index_select(scales.float().contiguous(), 0, tok, out=self._scales(self._a)[:n])
            planes = ["x8", "s"]
        xa = self._xrows(self._a, x.dtype)[:n]
        if xa.is_contiguous():
            torch.index_select(x, 0, tok, out=xa)
        else:
            xa.copy_(x.index_select(0, tok))
        if meta is not None:
            ids, w = meta
            T, W, L = h.tokens, self.world, h.num_local
            ranks = torch.arange(W, device=self.device).view(1, W, 1)
            local = torch.where(h.dest.unsqueeze(1) == ranks, ids.unsqueeze(1) - ranks * L, -1).to(torch.int32)
            bits = w.float().contiguous().view(torch.int32).unsqueeze(1).expand(T, W, self.num_topk)
            rows = torch.cat([local, bits], 2).view(T * W, 2 * self.num_topk)
            torch.index_select(rows, 0, src, out=self._meta(self._a)[:n])
        self._move(h, tuple(planes) + (("m",) if meta is not None else ()), forward=True)

    def _recv_valid(self, h: EPHandle) -> torch.Tensor | None:
        if h.mode == "exact":
            return None
        n = torch.arange(h.recv_rows, device=self.device)
        if self.transport == "symmetric-memory":
            return n < h.recv_counts.sum()
        return (n % h.capacity) < h.recv_counts[n // h.capacity]

    def _dispatch_forward(self, h: EPHandle, x, topk_idx, topk_weights):
        """Moves the rows of a layout; expands them on the receiving side (the first time for this layout)."""
        self._send_tokens(h, x, (topk_idx.to(self.device, torch.int64), topk_weights))
        if self.transport == "symmetric-memory" and h.recv_counts is None:
            h.recv_counts = self._so[0].clone()
        N, K = h.recv_rows, self.num_topk
        mb = self._meta(self._b)[:N]
        ids, w = mb[:, :K], mb[:, K:].contiguous().view(torch.float32)
        if h.slot_rows is None:
            h._expert, weight = self._expand(h, ids, w, self._recv_valid(h))
        else:  # a cached layout: only the weights are new
            flat = h.slot_rows.reshape(-1)
            weight = torch.zeros(h._rows + 1, dtype=torch.float32, device=self.device)
            weight.scatter_(0, torch.where(flat >= 0, flat, h._rows), w.reshape(-1))
            weight = weight[: h._rows]
        if isinstance(x, tuple):
            return (self._gather(self._xrows(self._b, x[0].dtype), h), self._gather(self._scales(self._b), h)), weight
        return self._gather(self._xrows(self._b, x.dtype), h), weight

    def _combine_forward(self, h: EPHandle, y: torch.Tensor, w: torch.Tensor | None) -> torch.Tensor:
        """Each received token's expert rows summed (float32, slot order), sent home, the ranks' partials summed
        in rank order (float32): out [T, H] in y's dtype."""
        from ..ops.moe import moe_unpermute

        sw = None
        if w is not None:
            sw = torch.where(h.slot_rows >= 0, w.float()[h.slot_rows.clamp(min=0)], 0.0)
        self._xrows(self._a, y.dtype)[: h.recv_rows].copy_(moe_unpermute(y, h.slot_rows, sw))
        self._move(h, ("x",), forward=False)
        return moe_unpermute(self._xrows(self._b, y.dtype), h.send_pos, None)

    def _combine_backward_rows(self, h: EPHandle, g: torch.Tensor) -> torch.Tensor:
        """The gradient of combine's output [T, H] sent like a dispatch; each expert-grouped row's gradient [R, H]
        (zero for padding)."""
        self._send_tokens(h, g)
        return self._gather(self._xrows(self._b, g.dtype), h)

    def _dispatch_backward(self, h: EPHandle, g_x: torch.Tensor | None, g_w: torch.Tensor | None, dtype):
        """Dispatch's backward: the rows' gradients summed per received token (a combine without weights) and the
        weights' gradients, moved home together; (grad x [T, H], grad weights [T, K])."""
        from ..ops.moe import moe_unpermute

        N, K, T = h.recv_rows, self.num_topk, h.tokens
        if g_x is None:
            g_x = torch.zeros(h._rows, self.hidden, dtype=dtype, device=self.device)
        self._xrows(self._a, dtype)[:N].copy_(moe_unpermute(g_x.contiguous(), h.slot_rows, None))
        gw_slots = torch.zeros(N, K, dtype=torch.float32, device=self.device)
        if g_w is not None:
            gw_slots = torch.where(h.slot_rows >= 0, g_w.float()[h.slot_rows.clamp(min=0)], 0.0)
        self._meta(self._a)[:N, K:].copy_(gw_slots.view(torch.int32))
        self._move(h, ("x", "m"), forward=False)
        grad_x = moe_unpermute(self._xrows(self._b, dtype), h.send_pos, None)
        bw = self._meta(self._b)[:, K:].contiguous().view(torch.float32)
        row = h.send_pos.gather(1, h.dest.clamp(max=self.world - 1))  # [T, K] the row that carried slot k
        got = bw.index_select(0, row.clamp(min=0).reshape(-1)).view(T, K, K).diagonal(dim1=1, dim2=2)
        grad_w = torch.where((row >= 0) & (h.dest < self.world), got, 0.0)
        return grad_x, grad_w

    def _dispatch(
        self,
        x: torch.Tensor,
        topk_idx: torch.Tensor | None = None,
        topk_weights: torch.Tensor | None = None,
        num_experts: int | None = None,
        expert_alignment: int = 1,
        mode: str = "exact",
        capacity: int | None = None,
        handle: EPHandle | None = None,
    ):
        """Sends each token to the ranks holding its top-k experts. x [T, H] (the buffer's hidden and dtype), or
        (x_fp8 [T, H] float8_e4m3fn, scales [T, ceil(H / 128)] float32) as DeepEP takes FP8 (quantize_fp8 makes
        them; not differentiable), topk_idx [T, K] global expert ids (-1: no expert), topk_weights [T, K]. Returns
        (recv_x [R, H] grouped by local expert and padded to expert_alignment — a (rows, scales) pair for FP8 —,
        recv_topk_idx [R] each row's local expert (-1: padding), recv_topk_weights [R] float32, handle, event).
        With handle= the layout of an earlier dispatch is reused (no count exchange, no host synchronisation)."""
        fp8 = isinstance(x, tuple)
        if fp8:
            if (
                len(x) != 2
                or x[0].dtype != torch.float8_e4m3fn
                or x[1].shape != (x[0].shape[0], self._widths["s"] // 4)
            ):
                raise ValueError(
                    "ep.dispatch: FP8 input is (x [T, H] float8_e4m3fn, scales [T, ceil(H / 128)] float32), got "
                    f"{[(tuple(t.shape), t.dtype) for t in x]}"
                )
        xs = x[0] if fp8 else x
        if mode not in ("exact", "capacity"):
            raise ValueError(f"ep.dispatch: mode must be 'exact' or 'capacity', got {mode!r}")
        if expert_alignment < 1:
            raise ValueError(f"ep.dispatch: expert_alignment must be >= 1, got {expert_alignment}")
        if topk_idx is None or topk_weights is None:
            raise ValueError("ep.dispatch: topk_idx and topk_weights are needed (with a cached handle too)")
        if handle is None:
            if num_experts is None:
                raise ValueError("ep.dispatch: num_experts is needed without a handle")
            code, detail = self._check(xs, topk_idx, topk_weights, int(num_experts))
            h = self._layout(topk_idx, int(num_experts), mode, int(expert_alignment), capacity, code, detail)
        else:
            if tuple(topk_idx.shape) != tuple(handle.dest.shape) or tuple(xs.shape) != (handle.tokens, self.hidden):
                raise ValueError(
                    f"ep.dispatch: the cached handle is for {handle.tokens} tokens x {self.num_topk} slots, got x "
                    f"{tuple(xs.shape)} and topk_idx {tuple(topk_idx.shape)}"
                )
            h = dataclasses.replace(handle)
        if fp8:
            with torch.no_grad():
                recv_x, recv_w = self._dispatch_forward(h, x, topk_idx, topk_weights)
        else:
            recv_x, recv_w = _Dispatch.apply(self, h, x, topk_weights, topk_idx)
        h._weights = recv_w
        return recv_x, h._expert, recv_w, h, _record_event(self.device)

    def _combine(self, y: torch.Tensor, handle: EPHandle, topk_weights: torch.Tensor | None = None):
        """out[t] = sum over the slots k of token t of w * y[row of (t, k)], float32 sums, back on the token's home
        rank: (combined_x [T, H] in y's dtype, event). topk_weights [R] (the expert-grouped rows' weights)
        default to those dispatched with the tokens; pass a tensor of ones for an unweighted sum."""
        if y.dim() != 2 or y.shape[0] != handle._rows or y.shape[1] != self.hidden:
            raise ValueError(
                f"ep.combine: expected y [{handle._rows}, {self.hidden}] (the dispatched rows), got {tuple(y.shape)}"
            )
        if y.dtype != self.dtype:
            raise ValueError(f"ep.combine: expected y of dtype {self.dtype}, got {y.dtype}")
        w = handle._weights if topk_weights is None else topk_weights
        if w.shape != (handle._rows,):
            raise ValueError(f"ep.combine: expected topk_weights [{handle._rows}], got {tuple(w.shape)}")
        out = _Combine.apply(self, handle, y, w)
        return out, _record_event(self.device)

    @functools.wraps(_dispatch)
    def dispatch(self, *args, **kwargs):
        return self._ordered(self._dispatch, *args, **kwargs)

    @functools.wraps(_combine)
    def combine(self, *args, **kwargs):
        return self._ordered(self._combine, *args, **kwargs)

    # ---- overlap -------------------------------------------------------------------------------------------------
    def dispatch_async(self, *args, **kwargs) -> "EPWork":
        """dispatch, on the buffer's communication thread (and, on a device with streams, its communication
        stream): returns at once; EPWork.wait() gives dispatch's results. Meanwhile the caller computes (the
        experts of the previous micro-batch); it must not use the group for other collectives until then."""
        return self._submit(self.dispatch, args, kwargs)

    def combine_async(self, *args, **kwargs) -> "EPWork":
        """combine, as dispatch_async runs dispatch."""
        return self._submit(self.combine, args, kwargs)

    def _submit(self, fn, args, kwargs) -> "EPWork":
        if getattr(self, "_comm", None) is None:
            self._comm = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mytorch-ep")  # calls stay in order
            self._comm_stream = torch.mytorch.Stream(self.device)
        caller = torch.mytorch.current_stream(self.device)
        ready = torch.mytorch.Event()
        ready.record(caller)  # the communication stream starts after what the caller queued for the inputs
        grad = torch.is_grad_enabled()

        def run():
            _ON_COMM.active = True
            try:
                with torch.set_grad_enabled(grad), torch.mytorch.stream(self._comm_stream):
                    self._comm_stream.wait_event(ready)
                    with torch.profiler.record_function(f"mytorch.ep.{fn.__name__.lstrip('_')}"):
                        out = fn(*args, **kwargs)
                    done = torch.mytorch.Event()
                    done.record(self._comm_stream)
                    return out, done
            finally:
                _ON_COMM.active = False

        return EPWork(self._comm.submit(run))

    def _ordered(self, fn, *args, **kwargs):
        """fn now, or — once this buffer has made an asynchronous call — queued behind the calls in flight on its
        communication thread and waited for: every rank then runs the buffer's calls (backward passes included)
        in the order its program made them, never two at once."""
        if getattr(self, "_comm", None) is None or getattr(_ON_COMM, "active", False):
            return fn(*args, **kwargs)
        return self._submit(fn, args, kwargs).wait()


class EPWork:
    """An asynchronous dispatch or combine (Buffer.dispatch_async / combine_async)."""

    def __init__(self, future):
        self._future = future

    def is_completed(self) -> bool:
        return self._future.done()

    def wait(self):
        """The call's results, once it has run; the caller's current stream then waits for the communication
        stream's work (DeepEP's event.current_stream_wait())."""
        out, done = self._future.result()
        torch.mytorch.current_stream().wait_event(done)
        return out


from ._ep_ops import combine_capacity, dispatch_capacity  # noqa: E402  (the operators call Buffer's methods)


def quantize_fp8(x: torch.Tensor) -> tuple:
    """x [T, H] -> (x_fp8 [T, H] float8_e4m3fn, scales [T, ceil(H / 128)] float32): one scale per 128 channels,
    the group's largest magnitude mapped to e4m3's largest finite value (448), DeepEP's input format."""
    T, H = x.shape
    groups = (H + 127) // 128
    padded = torch.nn.functional.pad(x.float(), (0, groups * 128 - H)).view(T, groups, 128)
    scales = (padded.abs().amax(-1) / 448.0).clamp(min=1e-12)
    q = (padded / scales.unsqueeze(-1)).view(T, groups * 128)[:, :H].to(torch.float8_e4m3fn)
    return q, scales


def dequantize_fp8(x: torch.Tensor, scales: torch.Tensor, dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """quantize_fp8's inverse (up to e4m3's rounding): [R, H] in dtype."""
    R, H = x.shape
    groups = scales.shape[1]
    padded = torch.nn.functional.pad(x.float(), (0, groups * 128 - H)).view(R, groups, 128)
    return (padded * scales.unsqueeze(-1)).view(R, groups * 128)[:, :H].to(dtype)


def _record_event(device):
    ev = torch.mytorch.Event()
    ev.record(torch.mytorch.current_stream(device))
    return ev


class _Dispatch(torch.autograd.Function):
    @staticmethod
    def forward(ctx, buf, h, x, topk_weights, topk_idx):
        with torch.no_grad():
            recv_x, weight = buf._dispatch_forward(h, x, topk_idx, topk_weights)
        ctx.buf, ctx.h, ctx.dtype = buf, h, x.dtype
        return recv_x, weight

    @staticmethod
    def backward(ctx, g_x, g_w):
        need_x, need_w = ctx.needs_input_grad[2], ctx.needs_input_grad[3]
        if not (need_x or need_w):
            return None, None, None, None, None
        with torch.no_grad():
            gx, gw = ctx.buf._ordered(ctx.buf._dispatch_backward, ctx.h, g_x, g_w if need_w else None, ctx.dtype)
        return None, None, (gx if need_x else None), (gw if need_w else None), None


class _Combine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, buf, h, y, w):
        with torch.no_grad():
            out = buf._combine_forward(h, y, w)
        ctx.buf, ctx.h = buf, h
        ctx.save_for_backward(y, w)
        return out

    @staticmethod
    def backward(ctx, g):
        y, w = ctx.saved_tensors
        with torch.no_grad():
            g_rows = ctx.buf._ordered(ctx.buf._combine_backward_rows, ctx.h, g.contiguous())
            gy = gw = None
            if ctx.needs_input_grad[2]:
                gy = (g_rows.float() * w.float().unsqueeze(1)).to(y.dtype)
            if ctx.needs_input_grad[3]:
                gw = (g_rows.float() * y.float()).sum(1).to(w.dtype)
        return None, None, gy, gw


def moe_experts(
    buf: Buffer,
    x: torch.Tensor,
    topk_idx: torch.Tensor,
    topk_weights: torch.Tensor,
    num_experts: int,
    gate_up_proj: torch.Tensor,
    down_proj: torch.Tensor,
    expert_alignment: int = 1,
    mode: str = "exact",
    capacity: int | None = None,
) -> torch.Tensor:
    """The routed experts of an MoE layer over the expert-parallel group: dispatch, this rank's SwiGLU experts as
    two grouped GEMMs (gate_up_proj [L, H, 2I] with the gate half first, down_proj [L, I, H]: the rank's L =
    num_experts / world experts), combine. x [T, H] -> sum_k w[t, k] * expert_k(x[t]) [T, H]; differentiable in x,
    topk_weights and the expert weights."""
    from ..ops.glu import swiglu

    L = num_experts // buf.world
    if gate_up_proj.dim() != 3 or gate_up_proj.shape[0] != L or down_proj.dim() != 3 or down_proj.shape[0] != L:
        raise ValueError(
            f"ep.moe_experts: expected this rank's {L} experts, gate_up_proj [L, H, 2I] and down_proj [L, I, H], got "
            f"{tuple(gate_up_proj.shape)} and {tuple(down_proj.shape)}"
        )
    recv_x, _, _, h, _ = buf.dispatch(
        x, topk_idx, topk_weights, num_experts, expert_alignment=expert_alignment, mode=mode, capacity=capacity
    )
    hidden = swiglu(torch._grouped_mm(recv_x, gate_up_proj, offs=h.offsets))
    y = torch._grouped_mm(hidden, down_proj, offs=h.offsets)
    return buf.combine(y, h)[0]


# ---- transformers: the expert-parallel experts implementation ---------------------------------------------------------
_EXPERT_PARAMS = ("gate_up_proj", "up_proj", "down_proj", "gate_up_proj_bias", "up_proj_bias", "down_proj_bias")


def experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """transformers' experts implementation "mytorch_ep": the module holds this rank's experts (shard_experts);
    its tokens are dispatched to the ranks of their experts, computed there on the grouped GEMMs, and combined
    back. Same signature and result as the single-device implementations."""
    from ..ops.moe import expert_rows

    buf = self._mytorch_ep_buffer
    recv_x, recv_idx, _, h, _ = buf.dispatch(
        hidden_states, top_k_index, top_k_weights, self._mytorch_ep_experts, mode=self._mytorch_ep_mode
    )
    y = expert_rows(self, recv_x, h.offsets, recv_idx.clamp(min=0) if self.has_bias else None)
    return buf.combine(y.to(hidden_states.dtype), h)[0]


def shard_experts(model: torch.nn.Module, group=None, max_tokens_per_rank: int = 4096, mode: str = "exact") -> int:
    """Keeps on this rank only its experts of every transformers experts module of `model` (experts r*L .. r*L+L-1
    of rank r, L = num_experts / world), and switches the model to the "mytorch_ep" implementation with one
    Buffer per hidden size shared by its layers (a layer uses it only between its dispatch and its combine, and
    backward passes run one at a time). Collective: every rank of the group calls it on the same model. The
    parameters that stay replicated (attention, router, shared experts, norms) need their gradients averaged over
    the group as data parallelism does; the experts' gradients come from every rank's tokens already. Returns the
    number of modules sharded. After it the model's state_dict holds this rank's experts only."""
    from transformers.integrations.moe import ExpertsInterface

    group = group if group is not None else dist.group.WORLD
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    buffers: dict = {}
    count = 0
    for m in model.modules():
        if not hasattr(m, "has_gate") or not hasattr(m, "num_experts") or getattr(m, "_mytorch_ep_buffer", None):
            continue
        experts = int(m.num_experts)
        if experts % world:
            raise ValueError(f"ep.shard_experts: {experts} experts of {type(m).__name__} over {world} ranks")
        local = experts // world
        first = None
        for name in _EXPERT_PARAMS:
            p = getattr(m, name, None)
            if isinstance(p, torch.nn.Parameter):
                if p.shape[0] != experts:
                    raise ValueError(
                        f"ep.shard_experts: {type(m).__name__}.{name} has {p.shape[0]} experts, not {experts}"
                    )
                setattr(
                    m, name, torch.nn.Parameter(p.detach()[rank * local : (rank + 1) * local].clone(), p.requires_grad)
                )
                first = first if first is not None else p
        hidden = int(getattr(m, "hidden_dim", getattr(getattr(m, "config", None), "hidden_size", 0)))
        top_k = int(getattr(m.config, "num_experts_per_tok", 0) or getattr(m.config, "top_k", 0))
        key = (hidden, top_k, first.dtype)
        if key not in buffers:
            buffers[key] = Buffer(group, max_tokens_per_rank, hidden, top_k, first.dtype)
        m._mytorch_ep_buffer, m._mytorch_ep_experts, m._mytorch_ep_mode = buffers[key], experts, mode
        m.num_experts = local
        count += 1
    if count:
        ExpertsInterface.register("mytorch_ep", experts_forward)
        model.set_experts_implementation("mytorch_ep")
    return count
