// Tensor-core GEMM for sm_90a with the group's elementwise epilogue fused:
// C[b, m, n] = Op(sum_k A[b, m, k] * B[b, k, n], ...), A slot 0 K-major (rows contiguous along
// k) and B slot 1 K-major too (columns contiguous along k: nn.Linear's x @ W^T) or, with B_MN
// and half operands, MN-major (rows contiguous along n: a plain A @ B), read by TMA as tensor
// maps. OPERAND: float32 operands multiplied in TF32, or float16 / bfloat16 ones as they are, or
// float32 ones in 3xTF32 (gemm_tma_split.h's kGemmTma*); fp32 accumulators and epilogue always.
// 3xTF32: a = a_big + a_small with a_big a with its low 13 bits dropped (what the tensor cores
// read of a float32 operand) and a * b ~ a_big * b_big + a_big * b_small + a_small * b_big (the
// dropped a_small * b_small and the bits the tensor cores drop of the small parts are about 2^-19
// of |a * b|; CUTLASS's "3xTF32"). Two warps of the producer warpgroup split each stage once it
// has landed: the loaded values stay, their remainders go to the same offsets in the stage's
// second half, which the three wgmmas of each step read through descriptors offset by that half.
// Each k-tile's products are summed apart and added to the accumulators in float32 arithmetic,
// which keeps float32's accuracy over long K (the tensor cores' own accumulation does not).
// Persistent and warp-specialized: one producer warpgroup issues TMA loads into a ring of
// 128-byte-swizzled shared-memory stages; two consumer warpgroups run wgmma on it and apply the
// epilogue through a shared-memory staging buffer (float4 rows). Edges need no predicates in the
// main loop: TMA fills out-of-bounds elements of a box with zeros.
// Tuning parameters: the BM x BN tile, the ring's STAGES, GROUP_M (the M-tiles walked down
// before moving along N, so that blocks running at the same time share A and B panels in L2) and
// PINGPONG: 0, the two consumers share each tile (half its rows each); 1, they take alternate
// tiles whole, so that one's epilogue overlaps the other's products (CUTLASS's ping-pong kernel);
// CLUSTER: 1, or 2 blocks of a thread-block cluster on M-neighbouring tiles that share their B
// tile: each loads half of it and multicasts it to both, which cuts the L2 reads of B by half.
// Host side (tensor maps, SM count, shared-memory opt-in): tma_map.h; launch geometry: launch.h.
// Design notes and measurements of the prototype it grew from: docs/GEMM_TMA.md.
#pragma once
#include "elementwise.cuh"  // vector_aligned, load_full
#include "fused_math.cuh"
#include "fusetune_args.h"
#include "gemm_tma_layout.h"
#include "gemm_tma_split.h"
#include "half.cuh"
#include "sm90.cuh"

namespace fusetune {

namespace tma_gemm {

constexpr int kConsumers = 2;             // consumer warpgroups, stacked along M
constexpr int kChunkBytes = 64 * 32 * 4;  // one staged 64x32 fp32 chunk
constexpr int kWatchWords = kConsumers + 2;  // progress of each consumer, the producer and the splitters

template <int BM_, int BN_, int STAGES_, int GROUP_M_, int PINGPONG_, int CLUSTER_, int OPERAND_, int B_MN_>
struct Config {
  static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_, GROUP_M = GROUP_M_, CLUSTER = CLUSTER_;
  static constexpr int OPERAND = OPERAND_;
  static constexpr bool kSplit = OPERAND == kGemmTma3xTF32;  // 3xTF32: stages split by the splitter warps
  static constexpr int kWgmmaType = kSplit ? kGemmTmaFloat32 : OPERAND;  // what the wgmmas multiply
  // B MN-major: a stage holds B as BN / 64 blocks of 64 columns by the k-tile's 64 rows (128 B
  // each), kBBlockBytes apart; each block of a cluster loads kBSliceRows of those rows of every
  // block. K-major: BN rows of one k-tile, each block of a cluster loading kBSliceRows of them.
  static constexpr bool B_MN = B_MN_ != 0;
  static constexpr int kKTile = gemm_tma_k_tile(OPERAND);  // elements of a k-tile: 128 bytes of a row
  static constexpr bool PINGPONG = PINGPONG_ != 0;
  static constexpr int kTileConsumers = PINGPONG ? 1 : kConsumers;  // consumers sharing a tile
  static constexpr int kMTiles = BM / (64 * kTileConsumers);        // m64 wgmma tiles per consumer
  static constexpr int kAccRegs = BN / 2;                 // fp32 accumulators per m64 tile
  static constexpr int kThreads = (kConsumers + 1) * 128;
  // __launch_bounds__(kThreads, 1) leaves each thread 65536 / 384 = 170 -> 168 registers; the
  // producer gives most of its share to the consumers (CUTLASS: 40 / 232, DeepGEMM: 48 / 224).
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kABytes = BM * 128, kBBytes = BN * 128;
  static constexpr int kBBlockBytes = 64 * 128;
  static constexpr int kBSliceRows = gemm_tma_b_box_rows(BN, CLUSTER, OPERAND, B_MN);  // what each block loads
  static constexpr int kLoadBytes = kABytes + kBBytes;  // what TMA delivers per stage
  // A 3xTF32 stage: the loaded operands (split into their TF32 values in place), then their
  // remainders; it takes the bytes and the barrier space of two stages (gemm_tma_stage_units).
  static constexpr int kUnits = gemm_tma_stage_units(OPERAND);
  static constexpr int kStageBytes = kUnits * kLoadBytes;
  static constexpr int kStagingOffset = STAGES * kStageBytes;
  static constexpr int kBarrierOffset = kStagingOffset + kGemmTmaStagingBytes;  // full, empty (, split)
  static constexpr int kTurnOffset = kBarrierOffset + kUnits * 2 * STAGES * 8;
  static constexpr int kWatchOffset = kTurnOffset + 2 * 8;
  static constexpr int kSmemBytes = kWatchOffset + kGemmTmaWatchBytes + 1024;  // +1024: alignment

  static_assert(kThreads == kGemmTmaThreads, "launch.h launches this many threads");
  static_assert(kSmemBytes == gemm_tma_smem_bytes(BM, BN, kUnits * STAGES), "launch.h's shared-memory size");
  static_assert(kGemmTmaStagingBytes == kConsumers * 2 * kChunkBytes, "two staging chunks per consumer");
  static_assert(kMTiles * 64 * kTileConsumers == BM && kMTiles <= 2, "each consumer owns 64 or 128 rows");
  static_assert(kMTiles * BN / 2 <= 128, "accumulators beyond 128 registers per thread would spill");
  static_assert(kMTiles * BN / 32 % 2 == 0, "staging buffers alternate per chunk and restart per tile");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "a Wgmma<BN, OPERAND> wrapper exists");
  static_assert(OPERAND == kGemmTmaFloat32 || gemm_tma_half(OPERAND) || kSplit, "an operand type");
  static_assert(!kSplit || !B_MN, "3xTF32 multiplies K-major operands (TF32 wgmma)");
  static_assert(!kSplit || kMTiles * kAccRegs <= 96, "3xTF32 holds a k-tile's sums beside the accumulators");
  static_assert(STAGES >= 2, "a ring needs two stages to overlap loads and math");
  static_assert(GROUP_M >= 1, "at least one M-tile per group");
  static_assert(CLUSTER == 1 || CLUSTER == 2, "a block or a pair");
  static_assert(kBSliceRows % 8 == 0, "each block's slice of B starts on a 1024-byte swizzle pattern");
  static_assert(!B_MN || (gemm_tma_half(OPERAND) && kKTile == 64 && BN % 64 == 0),
                "an MN-major B needs 16-bit operands (TF32 wgmma reads K-major only) in 64-column blocks");
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (kConsumers + 1) * kLaunchRegs,
                "setmaxnreg.inc would wait forever for registers the producer never frees");
  static_assert(kWatchWords * 4 <= kGemmTmaWatchBytes, "a progress word per role");
};

struct Tile {
  int b, m0, n0;
};

// The static schedule walks cluster tiles: CLUSTER x BM rows by BN columns, block `rank` of the
// cluster taking BM rows of each (with an odd number of M-tiles the last cluster row's second
// block gets rows past M: it loads zeros, shares its B slice and stores nothing). Its units are
// those tiles, the last round's cut along K where gemm_tma_split says so (gemm_tma_split.h).
struct Schedule {
  int tiles_m, tiles_n;  // cluster tiles along M, tiles along N
  int tiles;             // cluster tiles in all (batch-major)
  int rank;              // this block's rank in its cluster
  int k_tiles;           // k-tiles (Cfg::kKTile elements) of a whole tile
  GemmTmaSplit split;
};

template <class Cfg>
__device__ __forceinline__ Schedule make_schedule(const KernelArgs& a) {
  Schedule s;
  s.tiles_m = (int)((a.m + Cfg::CLUSTER * Cfg::BM - 1) / (Cfg::CLUSTER * Cfg::BM));
  s.tiles_n = (int)((a.n + Cfg::BN - 1) / Cfg::BN);
  s.tiles = (int)a.batch * s.tiles_m * s.tiles_n;
  s.rank = Cfg::CLUSTER == 1 ? 0 : (int)sm90::cluster_ctarank();
  s.k_tiles = (int)((a.k + Cfg::kKTile - 1) / Cfg::kKTile);
  s.split = gemm_tma_split(s.tiles, (int)gridDim.x / Cfg::CLUSTER, s.k_tiles);
  return s;
}
// A block's first unit is its cluster's index, and each cluster steps by the number of clusters
// in the grid (a whole number of them along x).
template <class Cfg>
__device__ __forceinline__ int first_unit() {
  return (int)blockIdx.x / Cfg::CLUSTER;
}
template <class Cfg>
__device__ __forceinline__ int unit_step() {
  return (int)gridDim.x / Cfg::CLUSTER;
}

// This block's tile of cluster tile t: batch-major, grouped (Triton-style) order inside a batch.
// Producer and consumers evaluate the same sequence, so they need no shared state.
template <class Cfg>
__device__ __forceinline__ Tile tile_at(int t, const Schedule& s) {
  const int per_batch = s.tiles_m * s.tiles_n;
  const int b = t / per_batch;
  const int pid = t - b * per_batch;
  const int per_group = Cfg::GROUP_M * s.tiles_n;
  const int first_m = pid / per_group * Cfg::GROUP_M;
  const int rows = min(s.tiles_m - first_m, Cfg::GROUP_M);
  const int local = pid % per_group;
  return {b, ((first_m + local % rows) * Cfg::CLUSTER + s.rank) * Cfg::BM, local / rows * Cfg::BN};
}

// Unit u of the schedule: its cluster tile, its k-tiles [k0, k1) and, in a split tail, its part
// and the tail tile's index (part 0 owns the tile; tail -1: a whole tile).
struct Unit {
  int tile, k0, k1, part, tail;
};
__device__ __forceinline__ Unit unit_at(int u, const Schedule& s) {
  if (u < s.split.full) return {u, 0, s.k_tiles, 0, -1};
  const int v = u - (int)s.split.full, i = v % s.split.tail, part = v / s.split.tail;
  return {(int)s.split.full + i, part * s.k_tiles / s.split.ways, (part + 1) * s.k_tiles / s.split.ways, part, i};
}

// Slot of the ring and the parity of its current use. A stage's full and empty barriers each
// complete one phase per use, so the parity flips whenever the index wraps (CUTLASS's
// PipelineState).
template <int STAGES>
struct RingPos {
  int stage = 0;
  unsigned phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) stage = 0, phase ^= 1;
  }
};

// Watchdog (lane 0 of the producer warpgroup's warp 1). Each consumer warpgroup writes its
// progress word after every k-tile and tile, the producer warp after every k-tile it issues (the
// 3xTF32 splitters after every k-tile they split), and each writes kFinished when done. If no
// word changes for kWatchdogNs, the pipeline is stuck: the trap ends the kernel with an error
// instead of hanging the GPU. Every wait of the kernel
// (mbarrier, named barrier, setmaxnreg.inc) sits between two progress writes. Stalled time is
// summed in steps of at most 1 ms, so time during which this context was not running does not
// count. 1 us sleeps: a block ends up to one sleep after its consumers.
constexpr unsigned kFinished = 0xffffffffu;
constexpr unsigned long long kWatchdogNs = 4000000000ull;
__device__ __forceinline__ void watch_progress(unsigned words) {
  unsigned seen[kWatchWords] = {};
  unsigned long long before = sm90::globaltimer_ns(), stalled = 0;
  for (;;) {
    bool moved = false, finished = true;
    for (int w = 0; w < kWatchWords; ++w) {
      const unsigned v = sm90::ld_volatile_shared(words + 4 * w);
      moved |= v != seen[w];
      finished &= v == kFinished;
      seen[w] = v;
    }
    if (finished) return;
    const unsigned long long now = sm90::globaltimer_ns();
    stalled = moved ? 0 : stalled + (now - before < 1000000ull ? now - before : 1000000ull);
    before = now;
    if (stalled > kWatchdogNs) __trap();
    __nanosleep(1000);
  }
}

// Producer warp: for every k-tile of every unit of this block, wait until the consumers released
// the stage, then (lane 0) announce the bytes and issue the A and B boxes (in a cluster, its
// slice of B to every block of it; the empty barrier then counts the consumers of all of them,
// so no block's slice lands in a stage that another still reads). Runs up to STAGES
// k-tiles ahead of the consumers, across tile boundaries (into the next tile during an
// epilogue). After a tile's last loads its lanes prefetch the tile's full epilogue inputs (a
// residual) into L2, which the consumers read right after the product.
template <class Cfg, class Op>
__device__ void produce(const KernelArgs& a, const TmaMap* ta, const TmaMap* tb, unsigned smem, unsigned full_bar,
                        unsigned empty_bar, const Schedule& sched) {
  const int lane = threadIdx.x % 32;
  const unsigned progress_word = smem + Cfg::kWatchOffset + 4 * kConsumers;
  unsigned progress = 0;
  if (lane == 0) {
    sm90::prefetch_tensormap(ta);
    sm90::prefetch_tensormap(tb);
  }
  const bool a_batched = a.stride[0][0] != 0, b_batched = a.stride[1][0] != 0;  // else encoded as batch 1
  RingPos<Cfg::STAGES> pos;
  for (int u = first_unit<Cfg>(); u < sched.split.units(); u += unit_step<Cfg>()) {
    const Unit unit = unit_at(u, sched);
    const Tile tc = tile_at<Cfg>(unit.tile, sched);
    for (int kt = unit.k0; kt < unit.k1; ++kt) {
      sm90::mbar_wait(empty_bar + 8 * pos.stage, pos.phase ^ 1);
      if (lane == 0) {
        const unsigned full = full_bar + 8 * pos.stage;
        const unsigned dst = smem + pos.stage * Cfg::kStageBytes;
        sm90::mbar_arrive_expect_tx(full, Cfg::kLoadBytes);
        const int k0 = kt * Cfg::kKTile;
        sm90::tma_load_3d(dst, ta, full, k0, tc.m0, a_batched ? tc.b : 0);
        const int b_batch = b_batched ? tc.b : 0;
        const unsigned short peers = (unsigned short)((1u << Cfg::CLUSTER) - 1);
        if (Cfg::B_MN) {  // the tensor map's coordinates: (n, k, batch), a box of 64 x kBSliceRows
          const int k_row = k0 + sched.rank * Cfg::kBSliceRows;
          const unsigned slice = dst + Cfg::kABytes + sched.rank * Cfg::kBSliceRows * 128;
#pragma unroll
          for (int blk = 0; blk < Cfg::BN / 64; ++blk) {
            if (Cfg::CLUSTER == 1)
              sm90::tma_load_3d(slice + blk * Cfg::kBBlockBytes, tb, full, tc.n0 + 64 * blk, k_row, b_batch);
            else
              sm90::tma_load_3d_multicast(slice + blk * Cfg::kBBlockBytes, tb, full, tc.n0 + 64 * blk, k_row, b_batch, peers);
          }
        } else if (Cfg::CLUSTER == 1) {
          sm90::tma_load_3d(dst + Cfg::kABytes, tb, full, k0, tc.n0, b_batch);
        } else {
          sm90::tma_load_3d_multicast(dst + Cfg::kABytes + sched.rank * Cfg::kBSliceRows * 128, tb, full, k0,
                                      tc.n0 + sched.rank * Cfg::kBSliceRows, b_batch, peers);
        }
      }
      pos.advance();
      sm90::st_volatile_shared(progress_word, ++progress);
    }
    if (Op::kFull > 0 && unit.part == 0) {  // one prefetch per 128-byte line of the tile's rows
      const int rows = min((long long)Cfg::BM, a.m - tc.m0), cols = min((long long)Cfg::BN, a.n - tc.n0);
      const long long first = ((long long)tc.b * a.m + tc.m0) * a.n + tc.n0;
#pragma unroll
      for (int s = 0; s < Op::kFull; ++s) {
        const int size = FullKinds<Op>::kind(s) ? 2 : 4, per_line = 128 / size;  // bytes, elements
        const int lines = (cols + per_line - 1) / per_line;
        const char* base = reinterpret_cast<const char*>(a.ptr[Op::kFullSlot + s]);
        for (int i = lane; i < rows * lines; i += 32)
          sm90::prefetch_l2(base + (first + (long long)(i / lines) * a.n + per_line * (i % lines)) * size);
      }
    }
  }
  // Leave only when the consumers have released every stage: no TMA write is then in flight
  // and every barrier phase this warp started has completed (CUTLASS's producer_tail).
  for (int s = 0; s < Cfg::STAGES; ++s) {
    sm90::mbar_wait(empty_bar + 8 * pos.stage, pos.phase ^ 1);
    pos.advance();
  }
  sm90::st_volatile_shared(progress_word, kFinished);
}

// 3xTF32 splitter (warps 2 and 3 of the producer warpgroup, t their thread 0..63): for every
// k-tile of every unit of this block, wait for the stage's bytes and write the remainder of each
// loaded float past its TF32 part (x minus x with its low 13 bits cleared, exact) at the same
// offset kLoadBytes on (the same swizzled layout, so the remainders' descriptors are the values'
// ones plus that offset). The loaded values stay as they are: sm_90's tensor cores read a float32
// operand of a TF32 wgmma with its low 13 bits dropped (tests/gpu/bench/gemm_3xtf32_probe.cu),
// which is that very TF32 part. Then fence the writes for the wgmmas (async proxy) and arrive,
// once per warp, on the stage's split barrier, which the consumers wait for instead of the full
// one. The consumers release the stage only after that, so no TMA write into it can overtake
// these. Four vectors in flight per thread: the two warps are the split's only threads.
template <class Cfg>
__device__ void split_stages(int t, unsigned smem, unsigned full_bar, unsigned split_bar, const Schedule& sched) {
  const unsigned progress_word = smem + Cfg::kWatchOffset + 4 * (kConsumers + 1);
  unsigned progress = 0;
  RingPos<Cfg::STAGES> pos;
  constexpr int kVectors = Cfg::kLoadBytes / 16, kThreads = 64, kInFlight = 4;
  static_assert(kVectors % (kInFlight * kThreads) == 0, "whole rounds of kInFlight vectors per thread");
  for (int u = first_unit<Cfg>(); u < sched.split.units(); u += unit_step<Cfg>()) {
    const Unit unit = unit_at(u, sched);
    for (int kt = unit.k0; kt < unit.k1; ++kt) {
      sm90::mbar_wait(full_bar + 8 * pos.stage, pos.phase);
      const unsigned base = smem + pos.stage * Cfg::kStageBytes;
#pragma unroll 1
      for (int i = t; i < kVectors; i += kInFlight * kThreads) {
        float4 v[kInFlight];
#pragma unroll
        for (int h = 0; h < kInFlight; ++h) v[h] = sm90::ld_shared_v4(base + 16 * (i + h * kThreads));
#pragma unroll
        for (int h = 0; h < kInFlight; ++h)
          sm90::st_shared_v4(base + Cfg::kLoadBytes + 16 * (i + h * kThreads),
                             make_float4(sm90::tf32_remainder(v[h].x), sm90::tf32_remainder(v[h].y),
                                         sm90::tf32_remainder(v[h].z), sm90::tf32_remainder(v[h].w)));
      }
      sm90::fence_proxy_async_shared();
      __syncwarp();
      if (t % 32 == 0) sm90::mbar_arrive(split_bar + 8 * pos.stage);
      pos.advance();
      sm90::st_volatile_shared(progress_word, ++progress);
    }
  }
  sm90::st_volatile_shared(progress_word, kFinished);
}

// Byte offset of 16-byte chunk `chunk` of row r in a staged 64x32 chunk: the chunk index is
// XORed with 2*(r%4) so that both the fragment writes (8 rows x 2 chunks per half-warp) and the
// row reads (8 chunks of one row per quarter-warp) hit 32 distinct banks.
__device__ __forceinline__ unsigned staged_offset(int r, int chunk) {
  return r * 128 + ((chunk ^ ((r & 3) << 1)) << 4);
}

// The full inputs (a residual) of 4 consecutive outputs at linear index idx (column col), loaded
// ahead of finish4 where it takes them as vectors (float4, or 4 halves: the launch allows it and
// all 4 columns are inside N); finish4 reads them itself element by element elsewhere.
template <class Op>
struct Full4 {
  float v[Op::kFull > 0 ? Op::kFull : 1][4];
};
template <class Op>
__device__ __forceinline__ void load_full4(const KernelArgs& a, long long idx, long long col, bool vec_ok,
                                           Full4<Op>& in) {
  if (!vec_ok || col + 4 > a.n) return;
#pragma unroll
  for (int s = 0; s < Op::kFull; ++s) {
    if (FullKinds<Op>::kind(s)) {
      load_full<Op, 4>(a, s, idx, in.v[s]);
    } else {  // through the read-only path, as this loop has always loaded float residuals
      const float4 t = __ldg(reinterpret_cast<const float4*>(a.ptr[Op::kFullSlot + s] + idx));
      in.v[s][0] = t.x, in.v[s][1] = t.y, in.v[s][2] = t.z, in.v[s][3] = t.w;
    }
  }
}

// The epilogue of those 4 outputs: x[0] the product, the full inputs at the same index,
// Op::apply, the outputs stored; float4 stores where load_full4 loads vectors (and 4 halves as
// one 8-byte store), else element by element. Storing after the 4 applies, not inside each,
// leaves the compiler free to issue the 4 elements' loads of broadcast inputs (a bias) together.
template <class Op>
__device__ __forceinline__ void finish4(const KernelArgs& a, const float (&v)[4], const Full4<Op>& in, long long idx,
                                        long long col, bool vec_ok) {
  constexpr int kHalf = HalfOutputs<Op>::kCount, kAll = Op::kOut + kHalf > 0 ? Op::kOut + kHalf : 1;
  if (vec_ok && col + 4 <= a.n) {
    float out[kAll][4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float x[Op::kIn];
      float y[kAll];
      x[0] = v[j];
#pragma unroll
      for (int s = 0; s < Op::kFull; ++s) x[1 + s] = in.v[s][j];
      // The epilogue keeps accurate libm arithmetic (MATH 0).
      if constexpr (kHalf > 0)
        Op::template apply<0, false, true>(a, idx + j, x, y);
      else
        Op::template apply<0>(a, idx + j, x, y);
#pragma unroll
      for (int o = 0; o < Op::kOut + kHalf; ++o) out[o][j] = y[o];
    }
#pragma unroll
    for (int o = 0; o < Op::kOut; ++o)
      *reinterpret_cast<float4*>(a.ptr[Op::kOutSlot + o] + idx) = make_float4(out[o][0], out[o][1], out[o][2], out[o][3]);
#pragma unroll
    for (int h = 0; h < kHalf; ++h)
      store_halves<4>(reinterpret_cast<unsigned short*>(a.ptr[Op::kOutSlot + Op::kOut + h]) + idx,
                      HalfOutputs<Op>::kind(h), out[Op::kOut + h]);
    return;
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (col + j >= a.n) break;
    float x[Op::kIn];
    float y[out_count<Op>()];
    x[0] = v[j];
#pragma unroll
    for (int s = 0; s < Op::kFull; ++s) {
      float t[1];
      load_full<Op, 1>(a, s, idx + j, t);
      x[1 + s] = t[0];
    }
    Op::template apply<0>(a, idx + j, x, y);
#pragma unroll
    for (int o = 0; o < Op::kOut; ++o) a.ptr[Op::kOutSlot + o][idx + j] = y[o];
  }
}

// The epilogue of a consumer's rows through shared memory, 64 rows x 32 columns at a time:
// fragments (PTX ISA, "WGMMA .m64nNk8 register fragment layout for accumulator matrix D":
// d[4j + 2h + e] is row 16*warp + lane/4 + 8h, column 8j + 2*(lane%4) + e) are written to one of
// two buffers, a warpgroup barrier, then each warp reads whole 128-byte rows and finishes them
// with float4. Two buffers alternate, so one barrier per chunk suffices: a buffer is written
// again only after the barrier of the next chunk, which every thread reaches after its reads.
// The full inputs of a chunk are loaded while the chunk before it is finished, so that their L2
// latency is not waited out in every chunk (residual over plain per config 1.069 -> 1.044 at
// 6144 x 3072 x 3072, docs/PERF.md).
template <class Cfg, class Op>
__device__ void store_staged(const KernelArgs& a, float (&acc)[Cfg::kMTiles][Cfg::kAccRegs], Tile tc, int consumer,
                             int first_row, unsigned staging, bool vec_ok) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  constexpr int kChunks = Cfg::kMTiles * (Cfg::BN / 32);
  // Thread t finishes rows i * 16 + t / 8 (i < 4), columns 4 * (t % 8) .. + 3 of each chunk.
  auto row_of = [&](int c, int i) -> long long {
    return tc.m0 + first_row + c / (Cfg::BN / 32) * 64 + (i * 128 + t) / 8;
  };
  auto col_of = [&](int c) -> long long { return tc.n0 + 32 * (c % (Cfg::BN / 32)) + 4 * (t % 8); };
  auto idx_of = [&](long long row, long long col) { return ((long long)tc.b * a.m + row) * a.n + col; };
  Full4<Op> in[2][4];
  auto load_chunk = [&](int c, Full4<Op>(&dst)[4]) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
      if (row_of(c, i) < a.m) load_full4<Op>(a, idx_of(row_of(c, i), col_of(c)), col_of(c), vec_ok, dst[i]);
  };
  if (Op::kFull > 0) load_chunk(0, in[0]);
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    if (Op::kFull > 0 && c + 1 < kChunks) load_chunk(c + 1, in[(c + 1) % 2]);
    const int mt = c / (Cfg::BN / 32), q = c % (Cfg::BN / 32);
    const unsigned buf = staging + c % 2 * kChunkBytes;
#pragma unroll
    for (int jj = 0; jj < 4; ++jj)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = 4 * q + jj, r = warp * 16 + lane / 4 + 8 * h;
        sm90::st_shared_v2(buf + staged_offset(r, 2 * jj + lane % 4 / 2) + lane % 2 * 8, acc[mt][4 * j + 2 * h],
                           acc[mt][4 * j + 2 * h + 1]);
      }
    sm90::named_barrier_sync(1 + consumer, 128);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const long long row = row_of(c, i);
      if (row >= a.m) continue;
      const float4 s = sm90::ld_shared_v4(buf + staged_offset((i * 128 + t) / 8, t % 8));
      const float v[4] = {s.x, s.y, s.z, s.w};
      finish4<Op>(a, v, in[c % 2][i], idx_of(row, col_of(c)), col_of(c), vec_ok);
    }
  }
}

// A consumer warp's release of a stage it has read: one arrival on that stage's empty barrier in
// every block of the cluster, whose producers all write into it.
template <class Cfg>
__device__ __forceinline__ void release(unsigned empty) {
  if (Cfg::CLUSTER == 1)
    sm90::mbar_arrive(empty);
  else
#pragma unroll
    for (int r = 0; r < Cfg::CLUSTER; ++r) sm90::mbar_arrive_cluster(empty, r);
}

// The split tail's workspace (gemm_tma_split.h): the counter of a tail tile's part of this
// consumer (its rows of this block's tile), and the partial sums of part `part` >= 1 of them,
// stored as the accumulators lie in registers (float4 r4 of m64 tile mt of thread t at
// (mt * kAccRegs / 4 + r4) * 128 + t, so each warp's stores are whole 512-byte runs).
template <class Cfg>
__device__ __forceinline__ unsigned* split_counter(unsigned* ws, const Schedule& s, const Unit& u, int consumer) {
  return ws + (u.tail * Cfg::CLUSTER + s.rank) * 2 + (Cfg::PINGPONG ? 0 : consumer);
}
template <class Cfg>
__device__ __forceinline__ float4* split_partial(unsigned* ws, const Schedule& s, const Unit& u, int part,
                                                 int consumer) {
  float* sums = reinterpret_cast<float*>(ws + gemm_tma_split_counters(s.split, Cfg::CLUSTER));
  const long long slot = ((long long)u.tail * (s.split.ways - 1) + (part - 1)) * Cfg::CLUSTER + s.rank;
  return reinterpret_cast<float4*>(sums + slot * Cfg::BM * Cfg::BN +
                                   (Cfg::PINGPONG ? 0 : consumer) * (Cfg::BM * Cfg::BN / kConsumers));
}

// Part >= 1 of a split tile: store the partial sums, then (every thread's fence, a barrier and
// one release add: CUTLASS's GenericBarrier) count them in. Part 0 waits for the others' counts
// (an acquire load, then the barrier), adds their sums and sets the counter back to 0 for the
// next launch. The parts of a tile run at once, in different clusters (one tail unit per
// cluster at most), and none of them waits for the owner, so the wait cannot deadlock.
template <class Cfg>
__device__ __forceinline__ void leave_partial(float (&acc)[Cfg::kMTiles][Cfg::kAccRegs], unsigned* ws,
                                              const Schedule& s, const Unit& u, int consumer) {
  const int t = threadIdx.x % 128;
  float4* dst = split_partial<Cfg>(ws, s, u, u.part, consumer);
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int r4 = 0; r4 < Cfg::kAccRegs / 4; ++r4)
      dst[(mt * (Cfg::kAccRegs / 4) + r4) * 128 + t] =
          make_float4(acc[mt][4 * r4], acc[mt][4 * r4 + 1], acc[mt][4 * r4 + 2], acc[mt][4 * r4 + 3]);
  __threadfence();
  sm90::named_barrier_sync(1 + consumer, 128);
  if (t == 0) sm90::red_release_gpu_add(split_counter<Cfg>(ws, s, u, consumer), 1u);
}
template <class Cfg>
__device__ __forceinline__ void gather_partials(float (&acc)[Cfg::kMTiles][Cfg::kAccRegs], unsigned* ws,
                                                const Schedule& s, const Unit& u, int consumer) {
  const int t = threadIdx.x % 128;
  unsigned* counter = split_counter<Cfg>(ws, s, u, consumer);
  if (t == 0)
    while (sm90::ld_acquire_gpu(counter) < (unsigned)(s.split.ways - 1)) __nanosleep(64);
  sm90::named_barrier_sync(1 + consumer, 128);
  for (int part = 1; part < s.split.ways; ++part) {
    const float4* src = split_partial<Cfg>(ws, s, u, part, consumer);
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
      for (int r4 = 0; r4 < Cfg::kAccRegs / 4; ++r4) {
        const float4 p = __ldcg(src + (mt * (Cfg::kAccRegs / 4) + r4) * 128 + t);
        acc[mt][4 * r4] += p.x, acc[mt][4 * r4 + 1] += p.y, acc[mt][4 * r4 + 2] += p.z, acc[mt][4 * r4 + 3] += p.w;
      }
  }
  if (t == 0) *counter = 0;
}

// Consumer warpgroup `consumer`: rows [64*kMTiles*consumer, +64*kMTiles) of every tile, or with
// PINGPONG every other tile of the block whole (it steps the ring over the other's k-tiles).
// Ping-pong consumers take turns in their main loops: a consumer waits for its turn before its
// first full-barrier wait of a tile and hands the turn over once it has passed its last. That
// keeps each within one phase of every stage's barrier, which parity waits need (without it a
// consumer arriving early mistakes an older phase of the stage for its own), and it is CUTLASS's
// ping-pong order: one consumer's MMAs while the other runs its epilogue. Per
// k-tile: wait for the stage's bytes (3xTF32: for its split), 4 k8 steps of wgmma per m64 tile
// (3xTF32: three products each), commit, and wait until at
// most this group is in flight; the previous k-tile's wgmmas have then retired, so each warp
// releases that stage with one arrival (4 arrivals per consumer sharing the stage complete the
// empty barrier's phase). A k-tile is 4 steps of 32 bytes per row: k8 in TF32, k16 in half (of
// an MN-major B, 16 of its rows per step).
template <class Cfg, class Op>
__device__ void consume(const KernelArgs& a, unsigned smem, unsigned ready_bar, unsigned empty_bar, int consumer,
                        const Schedule& sched, unsigned* split_ws, bool vec_ok) {
  const int lane = threadIdx.x % 32;
  // Every thread writes the same value: no branch near the wgmmas.
  const unsigned progress_word = smem + Cfg::kWatchOffset + 4 * consumer;
  unsigned progress = 0;
  const int first_row = Cfg::PINGPONG ? 0 : consumer * Cfg::kMTiles * 64;  // of each tile
  unsigned long long desc_a[Cfg::kMTiles];
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt) desc_a[mt] = sm90::make_desc_k_sw128(smem + (first_row + mt * 64) * 128);
  const unsigned long long desc_b = Cfg::B_MN ? sm90::make_desc_mn_sw128(smem + Cfg::kABytes, Cfg::kBBlockBytes)
                                              : sm90::make_desc_k_sw128(smem + Cfg::kABytes);
  constexpr int kBStep = Cfg::B_MN ? 16 * 128 >> 4 : 2;  // a k step of B: 16 rows of 128 B, or 32 B of each row
  const unsigned staging = smem + Cfg::kStagingOffset + consumer * 2 * kChunkBytes;

  float acc[Cfg::kMTiles][Cfg::kAccRegs];
  // 3xTF32: a k-tile's products are summed in `part` by the tensor cores and added to acc in
  // float32 arithmetic. Summed into acc by the tensor cores alone, they lost float32's accuracy
  // over long K (error about 8e-5 of the outputs' size at K = 3072, most likely the tensor
  // cores' accumulation keeping fewer bits than float32 rounding; docs/PERF.md eighteenth
  // session). Zeroed once only so that no register is read unset: each k-tile's first wgmma
  // overwrites it (scale-d 0).
  float part[Cfg::kSplit ? Cfg::kMTiles : 1][Cfg::kSplit ? Cfg::kAccRegs : 1] = {};
  RingPos<Cfg::STAGES> pos;
  const unsigned my_turn = smem + Cfg::kTurnOffset + 8 * consumer, their_turn = smem + Cfg::kTurnOffset + 8 * (1 - consumer);
  int taken = 0;  // tiles this consumer has run
  for (int u = first_unit<Cfg>(), j = 0; u < sched.split.units(); u += unit_step<Cfg>(), ++j) {
    const Unit unit = unit_at(u, sched);
    const int k_tiles = unit.k1 - unit.k0;
    if (Cfg::PINGPONG && j % 2 != consumer) {  // the other consumer's unit
      for (int kt = 0; kt < k_tiles; ++kt) pos.advance();
      continue;
    }
    // Consumer 0 starts; each turn it waits for is the other's hand-over after the tile before.
    if (Cfg::PINGPONG && (consumer == 1 || taken > 0)) sm90::mbar_wait(my_turn, (taken - (consumer == 0 ? 1 : 0)) & 1);
    const Tile tc = tile_at<Cfg>(unit.tile, sched);
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
      for (int i = 0; i < Cfg::kAccRegs; ++i) acc[mt][i] = 0.f;
    int prev_stage = 0;
    for (int kt = 0; kt < k_tiles; ++kt) {
      sm90::mbar_wait(ready_bar + 8 * pos.stage, pos.phase);
      const unsigned long long stage_off = (pos.stage * Cfg::kStageBytes) >> 4;
      constexpr unsigned long long kSmall = Cfg::kLoadBytes >> 4;  // 3xTF32: the remainders' offset
      using Mma = sm90::Wgmma<Cfg::BN, Cfg::kWgmmaType, Cfg::B_MN>;
      sm90::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int mt = 0; mt < Cfg::kMTiles; ++mt) {  // A: +2 per step, 32 bytes encoded >> 4
          const unsigned long long da = desc_a[mt] + stage_off + 2 * kk, db = desc_b + stage_off + kBStep * kk;
          if constexpr (Cfg::kSplit) {  // a_small * b_big, a_big * b_small, a_big * b_big into part
            Mma::mma(part[mt], da + kSmall, db, kk > 0);
            Mma::mma(part[mt], da, db + kSmall, 1);
            Mma::mma(part[mt], da, db, 1);
          } else {
            Mma::mma(acc[mt], da, db, 1);
          }
        }
      sm90::wgmma_commit();
      if constexpr (Cfg::kSplit) {  // part into acc once this k-tile's wgmmas have retired
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int mt = 0; mt < Cfg::kMTiles; ++mt) {
          sm90::fence_regs(part[mt]);
#pragma unroll
          for (int i = 0; i < Cfg::kAccRegs; ++i) acc[mt][i] += part[mt][i];
        }
        if (lane == 0) release<Cfg>(empty_bar + 8 * pos.stage);
      } else {  // the previous k-tile's wgmmas have retired
        sm90::wgmma_wait<1>();
#pragma unroll
        for (int mt = 0; mt < Cfg::kMTiles; ++mt) sm90::fence_regs(acc[mt]);
        if (kt > 0 && lane == 0) release<Cfg>(empty_bar + 8 * prev_stage);
      }
      prev_stage = pos.stage;
      pos.advance();
      sm90::st_volatile_shared(progress_word, ++progress);
    }
    if (Cfg::PINGPONG) sm90::mbar_arrive(their_turn);  // every thread: its full waits are behind it
    ++taken;
    // Unconditional (a no-op when K = 0): ptxas must see every path to the epilogue retire the
    // wgmmas, or it injects a wait of its own (C7517).
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) sm90::fence_regs(acc[mt]);
    if (!Cfg::kSplit && k_tiles > 0 && lane == 0) release<Cfg>(empty_bar + 8 * prev_stage);
    if (unit.part > 0) {
      leave_partial<Cfg>(acc, split_ws, sched, unit, consumer);
      sm90::st_volatile_shared(progress_word, ++progress);
      continue;
    }
    if (unit.tail >= 0) gather_partials<Cfg>(acc, split_ws, sched, unit, consumer);
    store_staged<Cfg, Op>(a, acc, tc, consumer, first_row, staging, vec_ok);
    sm90::st_volatile_shared(progress_word, ++progress);
  }
  sm90::st_volatile_shared(progress_word, kFinished);
}

}  // namespace tma_gemm

// ta and tb: A and B as tma_map.h encodes them (box rows BM and kBSliceRows, OPERAND's type, B
// MN-major where B_MN). The grid is a
// whole number of clusters of CLUSTER blocks along x (a compile-time cluster shape, so a plain
// launch makes the clusters), gemm_tma_grid's; split_ws: the workspace of the split tail it
// implies (gemm_tma_split_bytes, zeroed when allocated; unused where nothing is split).
template <int BM, int BN, int STAGES, int GROUP_M, int PINGPONG, int CLUSTER, class Op, int OPERAND = kGemmTmaFloat32,
          int B_MN = 0>
__global__ void __cluster_dims__(CLUSTER, 1, 1) __launch_bounds__(kGemmTmaThreads, 1)
    gemm_tma_kernel(const KernelArgs a, const __grid_constant__ TmaMap ta, const __grid_constant__ TmaMap tb,
                    unsigned* const split_ws) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = tma_gemm::Config<BM, BN, STAGES, GROUP_M, PINGPONG, CLUSTER, OPERAND, B_MN>;
  using namespace tma_gemm;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // TMA's 128B swizzle and the wgmma descriptors assume every stage starts on 1024 B.
  const unsigned smem = (sm90::smem_u32(smem_raw) + 1023u) & ~1023u;
  const unsigned full_bar = smem + Cfg::kBarrierOffset;  // STAGES x 8 B, then the empty and split ones
  const unsigned empty_bar = full_bar + 8 * STAGES, split_bar = empty_bar + 8 * STAGES;
  const unsigned progress_words = smem + Cfg::kWatchOffset;
  const Schedule sched = make_schedule<Cfg>(a);
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      sm90::mbar_init(full_bar + 8 * s, 1);                // the producer's arrive_expect_tx
      sm90::mbar_init(empty_bar + 8 * s, Cfg::kTileConsumers * 4 * CLUSTER);  // per consuming warp of the cluster
      if (Cfg::kSplit) sm90::mbar_init(split_bar + 8 * s, 2);  // per splitter warp
    }
    for (int c = 0; c < kConsumers; ++c) sm90::mbar_init(smem + Cfg::kTurnOffset + 8 * c, 128);  // a warpgroup's hand-over
    for (int w = 0; w < kWatchWords; ++w)  // without a split, no splitter reports
      sm90::st_volatile_shared(progress_words + 4 * w, w == kConsumers + 1 && !Cfg::kSplit ? kFinished : 0);
    sm90::fence_mbar_init();
  }
  // In a cluster, no block may signal a peer's barriers before the peer has initialized them.
  if (CLUSTER == 1)
    __syncthreads();
  else
    sm90::cluster_sync();
  // Read through a shuffle so the compiler knows it is warp-uniform (CUTLASS's
  // canonical_warp_group_idx): a branch it cannot prove uniform serializes the wgmmas (C7518).
  const int warpgroup = __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
  if (warpgroup == kConsumers) {  // the last warpgroup: producer, watchdog, two splitters (or idle warps)
    sm90::setmaxnreg_dec<Cfg::kProducerRegs>();
    const int warp = threadIdx.x % 128 / 32;
    if (warp == 0) produce<Cfg, Op>(a, &ta, &tb, smem, full_bar, empty_bar, sched);
    if (warp == 1 && threadIdx.x % 32 == 0) watch_progress(progress_words);
    if (Cfg::kSplit && warp >= 2) split_stages<Cfg>(threadIdx.x % 128 - 64, smem, full_bar, split_bar, sched);
    return;
  }
  sm90::setmaxnreg_inc<Cfg::kConsumerRegs>();
  // Vector epilogue: rows of whole float4s, every float input and output 16-byte aligned, every
  // half one 8-byte aligned.
  consume<Cfg, Op>(a, smem, Cfg::kSplit ? split_bar : full_bar, empty_bar, warpgroup, sched, split_ws,
                   a.n % 4 == 0 && vector_aligned<Op, 4>(a));
#else
  __trap();  // needs sm_90a (wgmma, setmaxnreg)
#endif
}

}  // namespace fusetune
