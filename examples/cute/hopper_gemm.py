"""Hopper (sm_90a) GEMM ``C[m, n] = sum_k A[m, k] * B[n, k]`` in fp16/bf16 with fp32 accumulation.

A is (M, K) and B is (N, K), both K-major (row-major; B is the transposed right operand, so ``C = A @ B.T``);
C is (M, N) row-major. M, N and K are dynamic; K must be a multiple of 8 (TMA needs 16-byte row pitches).

Technique (the CUTLASS CuTe DSL Hopper dense GEMM shows it; this is kernelpack's own, smaller version):

* host: TMA descriptors for A and B built from the tensors on every call, grid rounded up to whole clusters;
* a 2x1 thread-block cluster: the two CTAs of a cluster share their N tile, so B is loaded once by TMA and
  multicast to both;
* a multi-stage shared-memory pipeline (TMA producer, WGMMA consumer) over 128x128x64 tiles;
* tails in M, N and K need no special code on the load side (TMA fills out-of-bounds elements with zeros);
  the epilogue stores straight from the accumulators with a bounds predicate.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90
from cutlass.memory import SmemAllocator
from cutlass.tensor_utils import LayoutEnum

TILE_M, TILE_N = 128, 128
CLUSTER_M = 2
THREADS = 128  # one warp group


class HopperGemm:
    """Compile-time configuration lives on the receiver; the jit entry takes A, B, C and a stream."""

    def __init__(self, stages: int = 4) -> None:
        self.stages = stages
        self.cluster = (CLUSTER_M, 1, 1)

    @cute.jit
    def __call__(self, a: cute.Tensor, b: cute.Tensor, c: cute.Tensor, stream: cuda.CUstream):
        self.ab_dtype = a.element_type
        self.c_dtype = c.element_type
        a_major = LayoutEnum.from_tensor(a)
        b_major = LayoutEnum.from_tensor(b)
        self.mma = sm90.make_trivial_tiled_mma(self.ab_dtype, self.ab_dtype, a_major.sm90_mma_major_mode(),
                                               b_major.sm90_mma_major_mode(), cutlass.Float32, (1, 1, 1),
                                               tiler_mn=(64, TILE_N))
        tile_k = cute.size(self.mma.shape_mnk, mode=[2]) * 4
        self.tile = (TILE_M, TILE_N, tile_k)
        self.a_smem = sm90.make_smem_layout_a(a_major, self.tile, self.ab_dtype, self.stages)
        self.b_smem = sm90.make_smem_layout_b(b_major, self.tile, self.ab_dtype, self.stages)

        a_one = cute.slice_(self.a_smem, (None, None, 0))
        b_one = cute.slice_(self.b_smem, (None, None, 0))
        tma_a, ta = cute.nvgpu.cpasync.make_tiled_tma_atom(cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), a, a_one,
                                                           (TILE_M, tile_k))
        # B is multicast across the CLUSTER_M CTAs of a cluster (they share the N tile)
        tma_b, tb = cute.nvgpu.cpasync.make_tiled_tma_atom(cute.nvgpu.cpasync.CopyBulkTensorTileG2SMulticastOp(), b,
                                                           b_one, (TILE_N, tile_k), num_multicast=CLUSTER_M)

        @cute.struct
        class Storage:
            barriers: cute.struct.MemRange[cutlass.Int64, self.stages * 2]
            sa: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(self.a_smem)], 1024]
            sb: cute.struct.Align[cute.struct.MemRange[self.ab_dtype, cute.cosize(self.b_smem)], 1024]

        self.storage = Storage
        m, n = c.shape
        tiles_m = cute.ceil_div(m, TILE_M)
        grid_m = cute.ceil_div(tiles_m, CLUSTER_M) * CLUSTER_M
        self.kernel(tma_a, ta, tma_b, tb, c, self.mma, self.a_smem, self.b_smem).launch(
            grid=[grid_m, cute.ceil_div(n, TILE_N), 1], block=[THREADS, 1, 1], cluster=list(self.cluster),
            stream=stream)

    @cute.kernel
    def kernel(self, tma_a: cute.CopyAtom, mA: cute.Tensor, tma_b: cute.CopyAtom, mB: cute.Tensor, mC: cute.Tensor,
               mma: cute.TiledMma, a_smem: cute.ComposedLayout, b_smem: cute.ComposedLayout):
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bidy, _ = cute.arch.block_idx()
        if warp == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b)

        cta_layout = cute.make_layout(self.cluster)  # (CLUSTER_M, 1, 1)
        rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        ccoord = cta_layout.get_flat_coord(rank)
        b_mask = cute.make_layout_image_mask(cta_layout, ccoord, mode=0)

        a_one = cute.slice_(a_smem, (None, None, 0))
        b_one = cute.slice_(b_smem, (None, None, 0))
        tx_bytes = cute.size_in_bytes(self.ab_dtype, a_one) + cute.size_in_bytes(self.ab_dtype, b_one)

        smem = SmemAllocator()
        st = smem.allocate(self.storage)
        # each consumer warp releases a stage to itself and to the CTAs that multicast B into it
        consumers = pipeline.CooperativeGroup(pipeline.Agent.Thread, CLUSTER_M * (THREADS // 32))
        pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.barriers.data_ptr(), num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread), consumer_group=consumers,
            tx_count=tx_bytes, cta_layout_vmnk=cute.make_layout((1, *cta_layout.shape)))
        cute.arch.cluster_arrive_relaxed()

        sA = st.sa.get_tensor(a_smem.outer, swizzle=a_smem.inner)
        sB = st.sb.get_tensor(b_smem.outer, swizzle=b_smem.inner)
        gA = cute.local_tile(mA, (TILE_M, self.tile[2]), (bidx, None))  # (bM, bK, k tiles)
        gB = cute.local_tile(mB, (TILE_N, self.tile[2]), (bidy, None))
        gC = cute.local_tile(mC, (TILE_M, TILE_N), (bidx, bidy))

        tAsA, tAgA = cute.nvgpu.cpasync.tma_partition(tma_a, 0, cute.make_layout(1), cute.group_modes(sA, 0, 2),
                                                      cute.group_modes(gA, 0, 2))
        tBsB, tBgB = cute.nvgpu.cpasync.tma_partition(tma_b, ccoord[0], cute.make_layout(CLUSTER_M),
                                                      cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2))

        thr = mma.get_slice(tidx)  # per thread: A/B views are warp-group wide, C's are this thread's
        tCrA = mma.make_fragment_A(thr.partition_A(sA))
        tCrB = mma.make_fragment_B(thr.partition_B(sB))
        tCgC = thr.partition_C(gC)
        acc = cute.make_rmem_tensor(tCgC.shape, cutlass.Float32)
        acc.fill(0.0)
        cute.arch.cluster_wait()

        k_tiles = cute.size(gA, mode=[2])
        prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        cons = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        if warp == 0:
            for _ in cutlass.range(cutlass.min(self.stages, k_tiles), unroll=1):
                self._load(pipe, prod, tma_a, tAgA, tAsA, tma_b, tBgB, tBsB, b_mask)
                prod.advance()

        mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
        k_blocks = cute.size(tCrA, mode=[2])
        for _ in cutlass.range(k_tiles, unroll=1):
            pipe.consumer_wait(cons)
            cute.nvgpu.warpgroup.fence()
            for kb in cutlass.range(k_blocks, unroll_full=True):
                cute.gemm(mma, acc, tCrA[(None, None, kb, cons.index)], tCrB[(None, None, kb, cons.index)], acc)
            cute.nvgpu.warpgroup.commit_group()
            cute.nvgpu.warpgroup.wait_group(0)
            pipe.consumer_release(cons)
            cons.advance()
            if warp == 0 and prod.count < k_tiles:
                self._load(pipe, prod, tma_a, tAgA, tAsA, tma_b, tBgB, tBsB, b_mask)
                prod.advance()

        # epilogue: predicated stores of the accumulators (tails in M and N)
        cC = cute.local_tile(cute.make_identity_tensor(mC.shape), (TILE_M, TILE_N), (bidx, bidy))
        tCcC = thr.partition_C(cC)
        for i in cutlass.range(cute.size(acc), unroll_full=True):
            if cute.elem_less(tCcC[i], mC.shape):
                tCgC[i] = acc[i].to(self.c_dtype)
        # keep this CTA's shared memory alive until the cluster peer's multicast writes into it are done
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()

    @cute.jit
    def _load(self, pipe, state, tma_a, tAgA, tAsA, tma_b, tBgB, tBsB, b_mask):
        pipe.producer_acquire(state)
        bar = pipe.producer_get_barrier(state)
        cute.copy(tma_a, tAgA[(None, state.count)], tAsA[(None, state.index)], tma_bar_ptr=bar)
        cute.copy(tma_b, tBgB[(None, state.count)], tBsB[(None, state.index)], tma_bar_ptr=bar, mcast_mask=b_mask)
        pipe.producer_commit(state)


def example_args(dtype: type[cutlass.Numeric]) -> tuple:
    """Fake K-major A (M, K), B (N, K) and row-major C (M, N) with dynamic sizes; K and N multiples of 8."""
    from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
    from cutlass.cute.typing import SymInt

    m, n, k = SymInt(), SymInt(divisibility=8), SymInt(divisibility=8)
    a = make_fake_compact_tensor(dtype, (m, k), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(dtype, (n, k), stride_order=(1, 0), assumed_align=16)
    c = make_fake_compact_tensor(dtype, (m, n), stride_order=(1, 0), assumed_align=16)
    return a, b, c, make_fake_stream()
