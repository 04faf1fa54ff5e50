// The kernel of wgmma_tma_tf32.cu: a persistent, warp-specialized TF32 GEMM for sm_90a
// (C[b] = epi(A[b] @ B[b]^T), A [M,K] and B [N,K] both K-major), and its host launcher.
// One producer warpgroup issues TMA loads into a 128B-swizzled shared-memory ring; two consumer
// warpgroups run wgmma on it and apply the fused epilogue. Design notes: WGMMA_NOTES.md.
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>

#include "tma_sm90.cuh"
#include "wgmma_sm90.cuh"

namespace wgt {

// =====================================================================================
// Epilogue functors. apply<V> turns the accumulators of V consecutive outputs (row, col ..
// col+V-1) into outputs; V > 1 only when vector_ok(V) held at launch. prefetch is called by
// the 32 lanes of the producer warp once the last loads of a tile are issued.
// =====================================================================================
template <int V>
__device__ __forceinline__ void load_vec(const float* p, float (&v)[V]) {
  if constexpr (V == 4) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = t.x, v[1] = t.y, v[2] = t.z, v[3] = t.w;
  } else if constexpr (V == 2) {
    const float2 t = __ldg(reinterpret_cast<const float2*>(p));
    v[0] = t.x, v[1] = t.y;
  } else {
    v[0] = __ldg(p);
  }
}
inline bool aligned_for(const void* p, long long stride, int vec) {
  return reinterpret_cast<uintptr_t>(p) % (4 * vec) == 0 && stride % vec == 0;
}

// out = acc (no bias): the product alone, timed against cuBLAS.
struct EpilogueIdentity {
  template <int V>
  __device__ void apply(float (&)[V], int, int, int) const {}
  bool vector_ok(int) const { return true; }
  __device__ void prefetch(int, int, int, int, int, int) const {}
};

// out = gelu(acc + bias[col]) * scale with the exact (erf) GELU.
struct EpilogueBiasGeluScale {
  const float* bias;  // [batch][N]
  long long batch_stride_bias;
  float scale;
  template <int V>
  __device__ void apply(float (&x)[V], int b, int, int col) const {
    float bv[V];
    load_vec<V>(bias + b * batch_stride_bias + col, bv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float t = x[e] + bv[e];
      x[e] = 0.5f * t * (1.f + erff(t * 0.70710678118654752f)) * scale;
    }
  }
  bool vector_ok(int vec) const { return aligned_for(bias, batch_stride_bias, vec); }
  __device__ void prefetch(int, int, int, int, int, int) const {}  // bias: BN floats, cached
};

// out = relu(acc + bias[col]) + residual[row, col]; relu as (x < 0 ? 0 : x) so NaN propagates.
struct EpilogueBiasReluResidual {
  const float* bias;      // [batch][N]
  const float* residual;  // [batch][M][ldr]
  int ldr;
  long long batch_stride_bias, batch_stride_res;
  bool l2_prefetch;  // the producer warms L2 with the tile's residual (timed both ways)
  template <int V>
  __device__ void apply(float (&x)[V], int b, int row, int col) const {
    float bv[V], rv[V];
    load_vec<V>(bias + b * batch_stride_bias + col, bv);
    load_vec<V>(residual + b * batch_stride_res + static_cast<long long>(row) * ldr + col, rv);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const float t = x[e] + bv[e];
      x[e] = (t < 0.f ? 0.f : t) + rv[e];
    }
  }
  bool vector_ok(int vec) const {
    return aligned_for(bias, batch_stride_bias, vec) && aligned_for(residual, batch_stride_res, vec) &&
           ldr % vec == 0;
  }
  // One prefetch per 128-byte line of the rows x cols block at (m0, n0); every address is
  // inside the tensor (the first float of each 32-float run).
  __device__ void prefetch(int b, int m0, int n0, int rows, int cols, int lane) const {
    if (!l2_prefetch) return;
    const int lines_per_row = (cols + 31) / 32;
    const float* base = residual + b * batch_stride_res + static_cast<long long>(m0) * ldr + n0;
    for (int i = lane; i < rows * lines_per_row; i += 32)
      prefetch_l2(base + static_cast<long long>(i / lines_per_row) * ldr + 32 * (i % lines_per_row));
  }
};

// =====================================================================================
// Configuration and kernel
// =====================================================================================
enum class Store {
  kDirect,  // float2 stores straight from the accumulator fragments (8 rows x 32 B per warp)
  kStaged,  // 64x32 chunks through shared memory, then float4 stores (4 rows x 128 B per warp)
};

constexpr int kSm90SmemOptin = 232448;  // sm_90's 227 KB opt-in (the harness checks the device's)
constexpr int kChunkBytes = 64 * 32 * 4;  // one staged 64x32 fp32 chunk
constexpr int kConsumers = 2;             // consumer warpgroups, stacked along M
constexpr int staging_bytes(Store store) { return store == Store::kStaged ? kConsumers * 2 * kChunkBytes : 0; }
constexpr int kWatchWords = kConsumers + 1;  // progress of each consumer and of the producer
constexpr int kWatchBytes = 16;
// The most ring stages (BM + BN rows of 128 B each, plus a full and an empty barrier) that fit
// next to the epilogue staging buffers, the progress words and the 1 KB alignment slack.
constexpr int stages_that_fit(int bm, int bn, Store store) {
  return (kSm90SmemOptin - 1024 - staging_bytes(store) - kWatchBytes) / ((bm + bn) * 128 + 16);
}

template <int BM_, int BN_, int STAGES_, Store STORE_>
struct TmaConfig {
  static constexpr int BM = BM_, BN = BN_, STAGES = STAGES_;
  static constexpr Store STORE = STORE_;
  static constexpr int kMTiles = BM / (64 * kConsumers);  // m64 wgmma tiles per consumer
  static constexpr int kAccRegs = BN / 2;                 // fp32 accumulators per m64 tile
  static constexpr int kThreads = (kConsumers + 1) * 128;
  // __launch_bounds__(kThreads, 1) leaves each thread 65536 / 384 = 170 -> 168 registers; the
  // producer gives most of its share to the consumers (CUTLASS: 40 / 232, DeepGEMM: 48 / 224).
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
  static constexpr int kABytes = BM * 128, kBBytes = BN * 128;
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kStagingOffset = STAGES * kStageBytes;
  static constexpr int kBarrierOffset = kStagingOffset + staging_bytes(STORE);
  static constexpr int kWatchOffset = kBarrierOffset + 2 * STAGES * 8;
  static constexpr int kSmemBytes = kWatchOffset + kWatchBytes + 1024;  // +1024: alignment
  static constexpr int kChunksPerTile = kMTiles * BN / 32;                   // staged epilogue

  static_assert(BM == 128 || BM == 256, "each consumer owns 64 or 128 rows");
  static_assert(BN == 64 || BN == 128 || BN == 192 || BN == 256, "a WgmmaTF32<BN> wrapper exists");
  static_assert(STAGES >= 2, "a ring needs two stages to overlap loads and math");
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (kConsumers + 1) * kLaunchRegs,
                "setmaxnreg.inc would wait forever for registers the producer never frees");
  static_assert(kChunksPerTile % 2 == 0, "staging buffers alternate per chunk and restart per tile");
  static_assert(kWatchWords * 4 <= kWatchBytes, "a progress word per role");
};

// Everything the kernel needs besides the tensor maps; counts are precomputed on the host.
struct TmaGemmParams {
  float* C;
  int ldc;
  long long batch_stride_c;
  int M, N, batch;
  int tiles_m, tiles_n, k_tiles, group_m;
  int vec;  // widest aligned epilogue access, 1, 2 or 4 floats (set by the launcher)
};

// Tile `pid` in grouped (Triton-style) order: `group_m` M-tiles are walked down before moving
// along N, so CTAs running at the same time share A and B panels in L2.
__device__ __forceinline__ void grouped_tile(int pid, int tiles_m, int tiles_n, int group_m,
                                             int& tile_m, int& tile_n) {
  const int per_group = group_m * tiles_n;
  const int g = pid / per_group;
  const int first_m = g * group_m;
  const int gsz = min(tiles_m - first_m, group_m);
  const int local = pid - g * per_group;
  tile_m = first_m + local % gsz;
  tile_n = local / gsz;
}

struct TileCoord {
  int b, m0, n0;
};
// Tile t of the static schedule: batch-major, grouped order inside a batch. Producer and
// consumers evaluate the same sequence, so they need no shared state.
template <class Cfg>
__device__ __forceinline__ TileCoord tile_coord(const TmaGemmParams& p, int t) {
  const int per_batch = p.tiles_m * p.tiles_n;
  const int b = t / per_batch;
  int tm, tn;
  grouped_tile(t - b * per_batch, p.tiles_m, p.tiles_n, p.group_m, tm, tn);
  return {b, tm * Cfg::BM, tn * Cfg::BN};
}

// Slot of the ring and the parity of its current use. A stage's full and empty barriers each
// complete one phase per use, so the parity flips whenever the index wraps (CUTLASS's
// PipelineState).
template <int STAGES>
struct RingPos {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == STAGES) stage = 0, phase ^= 1;
  }
};

// Watchdog (lane 0 of the producer warpgroup's warp 1). Each consumer warpgroup writes its
// progress word after every k-tile and tile, the producer warp after every k-tile it issues, and
// each writes kFinished when done. If no word changes for kWatchdogNs, the pipeline is stuck (a
// whole 8192x4096x4096 GEMM takes ~1 ms): the trap ends the kernel with an error instead of
// hanging the shared GPU. Every wait of the kernel (mbarrier, named barrier, setmaxnreg.inc) sits
// between two progress writes. Stalled time is summed in steps of at most 1 ms, so time during
// which this context was not running does not count.
constexpr uint32_t kFinished = 0xffffffffu;
constexpr uint64_t kWatchdogNs = 4000000000ull;
__device__ void watch_progress(uint32_t words) {
  uint32_t seen[kWatchWords] = {};
  uint64_t before = globaltimer_ns(), stalled = 0;
  for (;;) {
    bool moved = false, finished = true;
    for (int w = 0; w < kWatchWords; ++w) {
      const uint32_t v = ld_volatile_shared(words + 4 * w);
      moved |= v != seen[w];
      finished &= v == kFinished;
      seen[w] = v;
    }
    if (finished) return;
    const uint64_t now = globaltimer_ns();
    stalled = moved ? 0 : stalled + (now - before < 1000000ull ? now - before : 1000000ull);
    before = now;
    if (stalled > kWatchdogNs) __trap();
    // A CTA ends up to one sleep after its consumers: 100 us sleeps added 0.13 ms steps to the
    // timings of the first GPU run.
    __nanosleep(1000);
  }
}

// Producer warp: for every k-tile of every tile of this CTA, wait until the consumers released
// the stage, then (lane 0) announce the bytes and issue the A and B boxes. Runs up to STAGES
// k-tiles ahead of the consumers, across tile boundaries (into the next tile during an epilogue).
template <class Cfg, class Epilogue>
__device__ void produce(const CUtensorMap* tmap_a, const CUtensorMap* tmap_b, const TmaGemmParams& p,
                        const Epilogue& epi, uint32_t smem, uint32_t full_bar, uint32_t empty_bar) {
  const int lane = threadIdx.x % 32;
  const uint32_t progress_word = smem + Cfg::kWatchOffset + 4 * kConsumers;
  uint32_t progress = 0;
  if (lane == 0) {
    prefetch_tensormap(tmap_a);
    prefetch_tensormap(tmap_b);
  }
  RingPos<Cfg::STAGES> pos;
  const int tiles = p.batch * p.tiles_m * p.tiles_n;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TileCoord tc = tile_coord<Cfg>(p, t);
    for (int kt = 0; kt < p.k_tiles; ++kt) {
      mbar_wait(empty_bar + 8 * pos.stage, pos.phase ^ 1);
      if (lane == 0) {
        const uint32_t full = full_bar + 8 * pos.stage;
        const uint32_t dst = smem + pos.stage * Cfg::kStageBytes;
        mbar_arrive_expect_tx(full, Cfg::kStageBytes);
        tma_load_3d(dst, tmap_a, full, kt * 32, tc.m0, tc.b);
        tma_load_3d(dst + Cfg::kABytes, tmap_b, full, kt * 32, tc.n0, tc.b);
      }
      pos.advance();
      st_volatile_shared(progress_word, ++progress);
    }
    epi.prefetch(tc.b, tc.m0, tc.n0, min(Cfg::BM, p.M - tc.m0), min(Cfg::BN, p.N - tc.n0), lane);
  }
  // Leave only when the consumers have released every stage: no TMA write is then in flight
  // and every barrier phase this warp started has completed (CUTLASS's producer_tail).
  for (int s = 0; s < Cfg::STAGES; ++s) {
    mbar_wait(empty_bar + 8 * pos.stage, pos.phase ^ 1);
    pos.advance();
  }
  st_volatile_shared(progress_word, kFinished);
}

// V consecutive outputs at (row, col): one V-wide store when the launcher allowed V-wide access
// and all V columns are inside N, else element by element up to N.
template <int V, class Epilogue>
__device__ __forceinline__ void finish(float (&v)[V], float* crow, const Epilogue& epi, int b, int row,
                                       int col, int N, bool vec_ok) {
  if (vec_ok && col + V <= N) {
    epi.template apply<V>(v, b, row, col);
    if constexpr (V == 4) *reinterpret_cast<float4*>(crow + col) = make_float4(v[0], v[1], v[2], v[3]);
    else *reinterpret_cast<float2*>(crow + col) = make_float2(v[0], v[1]);
    return;
  }
#pragma unroll
  for (int e = 0; e < V; ++e) {
    if (col + e >= N) break;
    float s[1] = {v[e]};
    epi.template apply<1>(s, b, row, col + e);
    crow[col + e] = s[0];
  }
}

// Straight from the m64nNk8 D fragment (PTX ISA, "WGMMA .m64nNk8 register fragment layout for
// accumulator matrix D"): d[4j + 2h + e] is row 16*warp + lane/4 + 8h, column 8j + 2*(lane%4) + e.
template <class Cfg, class Epilogue>
__device__ void store_direct(float (&acc)[Cfg::kMTiles][Cfg::kAccRegs], const TmaGemmParams& p,
                             const Epilogue& epi, TileCoord tc, int consumer) {
  const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32;
  float* C = p.C + tc.b * p.batch_stride_c;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = tc.m0 + (consumer * Cfg::kMTiles + mt) * 64 + warp * 16 + lane / 4 + 8 * h;
      if (row >= p.M) continue;
      float* crow = C + static_cast<long long>(row) * p.ldc;
#pragma unroll
      for (int j = 0; j < Cfg::BN / 8; ++j) {
        float v[2] = {acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]};
        finish<2>(v, crow, epi, tc.b, row, tc.n0 + 8 * j + 2 * (lane % 4), p.N, p.vec >= 2);
      }
    }
}

// Byte offset of 16-byte chunk `chunk` of row r in a staged 64x32 chunk: the chunk index is
// XORed with 2*(r%4) so that both the fragment writes (8 rows x 2 chunks per half-warp) and the
// row reads (8 chunks of one row per quarter-warp) hit 32 distinct banks.
__device__ __forceinline__ uint32_t staged_offset(int r, int chunk) {
  return r * 128 + ((chunk ^ ((r & 3) << 1)) << 4);
}

// Through shared memory, 64 rows x 32 columns at a time per warpgroup: fragments are written
// to one of two buffers, a warpgroup barrier, then each warp reads whole 128-byte rows and stores
// them with float4. Two buffers alternate, so one barrier per chunk suffices: a buffer is written
// again only after the barrier of the next chunk, which every thread reaches after its reads.
template <class Cfg, class Epilogue>
__device__ void store_staged(float (&acc)[Cfg::kMTiles][Cfg::kAccRegs], const TmaGemmParams& p,
                             const Epilogue& epi, TileCoord tc, int consumer, uint32_t staging) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  float* C = p.C + tc.b * p.batch_stride_c;
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
    for (int q = 0; q < Cfg::BN / 32; ++q) {
      const uint32_t buf = staging + (mt * (Cfg::BN / 32) + q) % 2 * kChunkBytes;
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = 4 * q + jj, r = warp * 16 + lane / 4 + 8 * h;
          st_shared_v2(buf + staged_offset(r, 2 * jj + lane % 4 / 2) + lane % 2 * 8,
                       acc[mt][4 * j + 2 * h], acc[mt][4 * j + 2 * h + 1]);
        }
      named_barrier_sync(1 + consumer, 128);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = (i * 128 + t) / 8, chunk = t % 8;
        const int row = tc.m0 + (consumer * Cfg::kMTiles + mt) * 64 + r;
        if (row >= p.M) continue;
        const float4 s = ld_shared_v4(buf + staged_offset(r, chunk));
        float v[4] = {s.x, s.y, s.z, s.w};
        finish<4>(v, C + static_cast<long long>(row) * p.ldc, epi, tc.b, row,
                  tc.n0 + 32 * q + 4 * chunk, p.N, p.vec >= 4);
      }
    }
}

// Consumer warpgroup `consumer`: rows [64*kMTiles*consumer, +64*kMTiles) of every tile. Per
// k-tile: wait for the stage's bytes, 4 k8 steps of wgmma per m64 tile, commit, and wait until at
// most this group is in flight; the previous k-tile's wgmmas have then retired, so each warp
// releases that stage with one arrival (8 arrivals complete the empty barrier's phase).
template <class Cfg, class Epilogue>
__device__ void consume(const TmaGemmParams& p, const Epilogue& epi, uint32_t smem, uint32_t full_bar,
                        uint32_t empty_bar, int consumer) {
  const int lane = threadIdx.x % 32;
  // Every thread writes the same value: no branch near the wgmmas.
  const uint32_t progress_word = smem + Cfg::kWatchOffset + 4 * consumer;
  uint32_t progress = 0;
  uint64_t desc_a[Cfg::kMTiles];
#pragma unroll
  for (int mt = 0; mt < Cfg::kMTiles; ++mt)
    desc_a[mt] = wg::make_desc_k_sw128(smem + (consumer * Cfg::kMTiles + mt) * 64 * 128);
  const uint64_t desc_b = wg::make_desc_k_sw128(smem + Cfg::kABytes);
  const uint32_t staging = smem + Cfg::kStagingOffset + consumer * 2 * kChunkBytes;

  float acc[Cfg::kMTiles][Cfg::kAccRegs];
  RingPos<Cfg::STAGES> pos;
  const int tiles = p.batch * p.tiles_m * p.tiles_n;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const TileCoord tc = tile_coord<Cfg>(p, t);
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt)
#pragma unroll
      for (int i = 0; i < Cfg::kAccRegs; ++i) acc[mt][i] = 0.f;
    int prev_stage = 0;
    for (int kt = 0; kt < p.k_tiles; ++kt) {
      mbar_wait(full_bar + 8 * pos.stage, pos.phase);
      const uint64_t stage_off = (pos.stage * Cfg::kStageBytes) >> 4;
      wg::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
#pragma unroll
        for (int mt = 0; mt < Cfg::kMTiles; ++mt)  // +2 per k8 step: 32 bytes, encoded >> 4
          wg::WgmmaTF32<Cfg::BN>::mma(acc[mt], desc_a[mt] + stage_off + 2 * kk, desc_b + stage_off + 2 * kk, 1);
      wg::wgmma_commit();
      wg::wgmma_wait<1>();
#pragma unroll
      for (int mt = 0; mt < Cfg::kMTiles; ++mt) wg::fence_regs(acc[mt]);
      if (kt > 0 && lane == 0) mbar_arrive(empty_bar + 8 * prev_stage);
      prev_stage = pos.stage;
      pos.advance();
      st_volatile_shared(progress_word, ++progress);
    }
    // Unconditional (a no-op when K = 0): ptxas must see every path to the epilogue retire the
    // wgmmas, or it injects a wait of its own (C7517).
    wg::wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < Cfg::kMTiles; ++mt) wg::fence_regs(acc[mt]);
    if (p.k_tiles > 0 && lane == 0) mbar_arrive(empty_bar + 8 * prev_stage);
    if constexpr (Cfg::STORE == Store::kStaged) store_staged<Cfg>(acc, p, epi, tc, consumer, staging);
    else store_direct<Cfg>(acc, p, epi, tc, consumer);
    st_volatile_shared(progress_word, ++progress);
  }
  st_volatile_shared(progress_word, kFinished);
}

template <int BM, int BN, int STAGES, Store STORE, class Epilogue>
__global__ void __launch_bounds__(TmaConfig<BM, BN, STAGES, STORE>::kThreads, 1)
    wgmma_tma_tf32_gemm(const __grid_constant__ CUtensorMap tmap_a,
                        const __grid_constant__ CUtensorMap tmap_b, const TmaGemmParams p,
                        const Epilogue epi) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = TmaConfig<BM, BN, STAGES, STORE>;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // TMA's 128B swizzle and the wgmma descriptors assume every stage starts on 1024 B.
  const uint32_t smem = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t full_bar = smem + Cfg::kBarrierOffset;  // STAGES x 8 B, then the empty ones
  const uint32_t empty_bar = full_bar + 8 * STAGES;
  const uint32_t progress_words = smem + Cfg::kWatchOffset;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(full_bar + 8 * s, 1);                // the producer's arrive_expect_tx
      mbar_init(empty_bar + 8 * s, kConsumers * 4);  // one arrival per consumer warp
    }
    for (int w = 0; w < kWatchWords; ++w) st_volatile_shared(progress_words + 4 * w, 0);
    fence_mbar_init();
  }
  __syncthreads();
  // Read through a shuffle so the compiler knows it is warp-uniform (CUTLASS's
  // canonical_warp_group_idx): a branch it cannot prove uniform serializes the wgmmas (C7518).
  const int warpgroup = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
  if (warpgroup == kConsumers) {  // the last warpgroup: producer, watchdog, two idle warps
    setmaxnreg_dec<Cfg::kProducerRegs>();
    const int warp = threadIdx.x % 128 / 32;
    if (warp == 0) produce<Cfg>(&tmap_a, &tmap_b, p, epi, smem, full_bar, empty_bar);
    if (warp == 1 && threadIdx.x % 32 == 0) watch_progress(progress_words);
    return;
  }
  setmaxnreg_inc<Cfg::kConsumerRegs>();
  consume<Cfg>(p, epi, smem, full_bar, empty_bar, warpgroup);
#else
  __trap();  // needs sm_90a (wgmma, setmaxnreg)
#endif
}

// =====================================================================================
// Host side
// =====================================================================================
struct TmaGemmArgs {
  const float* A;  // [batch][M][lda]
  const float* B;  // [batch][N][ldb]
  float* C;        // [batch][M][ldc]
  int M, N, K, lda, ldb, ldc, batch;
  long long batch_stride_a, batch_stride_b, batch_stride_c;  // in floats
  int group_m;   // grouped rasterization: M-tiles walked down before moving along N
  int max_ctas;  // persistent grid size limit; 0: one CTA per SM
};

// Why these arguments cannot run, or nullptr (CUTLASS's can_implement). TMA needs 16-byte
// aligned base addresses and row (and batch) strides that are multiples of 16 bytes, i.e. lda,
// ldb and the batch strides of A and B multiples of 4 floats; K itself may be anything.
inline const char* tma_gemm_unsupported(const TmaGemmArgs& a) {
  if (a.M < 0 || a.N < 0 || a.K < 0 || a.batch < 0) return "negative size";
  if (a.lda < a.K || a.ldb < a.K || a.ldc < a.N) return "leading dimension below the row length";
  if (a.lda % 4 || a.ldb % 4) return "lda and ldb must be multiples of 4 floats (TMA: 16-byte strides)";
  if (a.batch > 1 && (a.batch_stride_a % 4 || a.batch_stride_b % 4))
    return "batch strides of A and B must be multiples of 4 floats";
  if ((reinterpret_cast<uintptr_t>(a.A) | reinterpret_cast<uintptr_t>(a.B)) % 16)
    return "A and B must be 16-byte aligned";
  if (a.group_m < 1) return "group_m must be at least 1";
  return nullptr;
}

// Widest access (4, 2 or 1 floats) that C and the epilogue's own operands allow everywhere.
template <class Epilogue>
int epilogue_vector_width(const TmaGemmArgs& a, const Epilogue& epi) {
  for (int vec : {4, 2})
    if (a.ldc % vec == 0 && aligned_for(a.C, a.batch > 1 ? a.batch_stride_c : 0, vec) && epi.vector_ok(vec))
      return vec;
  return 1;
}

// One-time per instantiation: opt into the dynamic shared memory, and refuse a build whose
// register count is below what the setmaxnreg split assumes (setmaxnreg.inc would then wait
// forever for registers).
template <class Cfg, class Kernel>
cudaError_t prepare_kernel(Kernel kernel) {
  static cudaError_t status = cudaErrorNotReady;
  if (status != cudaErrorNotReady) return status;
  status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes);
  cudaFuncAttributes attr;
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attr, kernel);
  if (status == cudaSuccess && attr.numRegs < Cfg::kLaunchRegs) {
    std::fprintf(stderr, "kernel built with %d registers per thread, setmaxnreg needs %d\n", attr.numRegs,
                 Cfg::kLaunchRegs);
    status = cudaErrorNotSupported;
  }
  return status;
}

template <int BM, int BN, int STAGES, Store STORE, class Epilogue>
cudaError_t launch_wgmma_tma(const TmaGemmArgs& a, const Epilogue& epi, cudaStream_t stream) {
  using Cfg = TmaConfig<BM, BN, STAGES, STORE>;
  auto kernel = wgmma_tma_tf32_gemm<BM, BN, STAGES, STORE, Epilogue>;
  if (const cudaError_t e = prepare_kernel<Cfg>(kernel); e != cudaSuccess) return e;
  if (tma_gemm_unsupported(a)) return cudaErrorInvalidValue;
  if (a.M == 0 || a.N == 0 || a.batch == 0) return cudaSuccess;

  TmaGemmParams p{a.C, a.ldc, a.batch_stride_c, a.M, a.N, a.batch, (a.M + BM - 1) / BM, (a.N + BN - 1) / BN,
                  (a.K + 31) / 32, a.group_m, epilogue_vector_width(a, epi)};
  const long long tiles = static_cast<long long>(a.batch) * p.tiles_m * p.tiles_n;
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  CUtensorMap tmap_a, tmap_b;
  cudaError_t e = encode_k_major(&tmap_a, a.A, a.M, a.K, a.lda, a.batch_stride_a, a.batch, BM);
  if (e == cudaSuccess) e = encode_k_major(&tmap_b, a.B, a.N, a.K, a.ldb, a.batch_stride_b, a.batch, BN);
  if (e != cudaSuccess) return e;

  int device, sms;
  if ((e = cudaGetDevice(&device)) != cudaSuccess) return e;
  if ((e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess) return e;
  const int ctas = a.max_ctas > 0 ? std::min(sms, a.max_ctas) : sms;
  const unsigned grid = static_cast<unsigned>(std::min<long long>(tiles, ctas));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(tmap_a, tmap_b, p, epi);
  return cudaGetLastError();
}

}  // namespace wgt
