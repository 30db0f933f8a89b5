// Probes of what this CPU's instruction set and memory system allow: the physical bound's rates
// (measure/physical.py). No loop of the study runs this code, so it bounds them all alike.
//
// Peaks: each thread issues `iters` rounds of independent multiply-adds from registers (no loads),
// enough chains to cover the instruction's latency on every port that executes it:
//   fma_avx512 / fma_avx2   fp32 vfmadd231ps on zmm / ymm (2 FLOPs a lane);
//   dpbf16_avx512           vdpbf16ps on zmm (2 bf16 products into an fp32 lane: 4 FLOPs a lane);
//   amx_bf16                tdpbf16ps on four 16x16 fp32 tiles (16 x 16 x 32 products each).
// Each returns the wall seconds of the parallel region (all threads together), or -1 where the
// operating system refuses the instruction set (AMX needs its tile state granted to the process).
// The functions carry their own target attribute: the file builds on any x86-64 CPU, and Python
// calls only what the CPU's flags name.
//
// Lines: random rows read (gather) or read-modified-written (update), `read` bytes of each row,
// rows `stride` bytes apart, ids given, split evenly over the threads, each thread prefetching
// `ahead` rows ahead with one of several hints. A line is one vector add into 16 lanes the compiler
// keeps in a register: a probe must do less per line than any kernel (an accumulator indexed at run
// time lives in memory, and its store-to-load chain made the first version slower than the loops'
// own gathers). Returns a checksum (the reads cannot be dropped).
#include <immintrin.h>
#include <omp.h>
#include <sys/syscall.h>
#include <torch/extension.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

constexpr int CHAINS = 16;  // independent accumulators: latency 4-6 cycles x 2-3 ports, with room

template <int Hint>
inline void prefetch_lines(const char* row, int64_t bytes) {
  for (int64_t c = 0; c < bytes; c += 64) {
    if constexpr (Hint == 0) _mm_prefetch(row + c, _MM_HINT_T0);
    if constexpr (Hint == 1) _mm_prefetch(row + c, _MM_HINT_T1);
    if constexpr (Hint == 2) _mm_prefetch(row + c, _MM_HINT_T2);
    if constexpr (Hint == 3) _mm_prefetch(row + c, _MM_HINT_NTA);
    if constexpr (Hint == 4) __builtin_prefetch(row + c, 1, 3);  // prefetchw: the line comes owned
  }
}

template <int Hint>
int64_t gather_with(const char* base, const int64_t* id, int64_t n, int64_t stride, int64_t read, int64_t ahead,
                    int64_t threads) {
  const int64_t words = read / 4, lines = words / 16 * 16;
  uint64_t sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  {
    const int64_t count = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = n * me / count, last = n * (me + 1) / count;
    uint32_t acc[16] = {}, tail = 0;  // 16 lanes the compiler keeps in one vector register: a line per add
    for (int64_t j = first; j < last; ++j) {
      if (ahead && j + ahead < last) prefetch_lines<Hint>(base + id[j + ahead] * stride, read);
      const uint32_t* r = reinterpret_cast<const uint32_t*>(base + id[j] * stride);
      for (int64_t d = 0; d < lines; d += 16)
        for (int k = 0; k < 16; ++k) acc[k] += r[d + k];
      for (int64_t d = lines; d < words; ++d) tail += r[d];
    }
    for (int k = 0; k < 16; ++k) sum += acc[k];
    sum += tail;
  }
  return static_cast<int64_t>(sum);
}

template <int Hint>
void update_with(char* base, const int64_t* id, int64_t n, int64_t stride, int64_t bytes, int64_t ahead,
                 int64_t threads) {
  const int64_t words = bytes / 4, lines = words / 16 * 16;
#pragma omp parallel num_threads(threads)
  {
    const int64_t count = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = n * me / count, last = n * (me + 1) / count;
    for (int64_t j = first; j < last; ++j) {
      if (ahead && j + ahead < last) prefetch_lines<Hint>(base + id[j + ahead] * stride, bytes);
      uint32_t* __restrict__ r = reinterpret_cast<uint32_t*>(base + id[j] * stride);
      for (int64_t d = 0; d < lines; d += 16)  // a line per vector add, as the gather
        for (int k = 0; k < 16; ++k) r[d + k] += static_cast<uint32_t>(k | 1);
      for (int64_t d = lines; d < words; ++d) r[d] += 1u;
    }
  }
}

void check_rows(const torch::Tensor& buffer, const torch::Tensor& ids, int64_t stride, int64_t read) {
  TORCH_CHECK(ids.dtype() == torch::kInt64 && ids.is_contiguous(), "ids: contiguous int64");
  TORCH_CHECK(read % 4 == 0 && read > 0 && read <= stride, "read: a multiple of 4 bytes within a row");
  if (ids.numel()) {
    const int64_t most = ids.max().item<int64_t>(), least = ids.min().item<int64_t>();
    TORCH_CHECK(least >= 0 && (most + 1) * stride <= buffer.numel() * buffer.element_size(), "ids: rows within the buffer");
  }
}

}  // namespace

__attribute__((target("avx512f"))) double fma_avx512(int64_t iters, int64_t threads) {
  float sink = 0.0f;
  const auto start = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-6f);
    __m512 a[CHAINS];
    for (int k = 0; k < CHAINS; ++k) a[k] = _mm512_set1_ps(1.0f + k);
    for (int64_t i = 0; i < iters; ++i)
      for (int k = 0; k < CHAINS; ++k) a[k] = _mm512_fmadd_ps(a[k], x, y);
    for (int k = 0; k < CHAINS; ++k) sink += _mm512_reduce_add_ps(a[k]);
  }
  const double took = since(start);
  return sink == sink ? took : -took;  // reads `sink`: the chains cannot be dropped
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters, int64_t threads) {
  float sink = 0.0f;
  const auto start = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-6f);
    __m256 a[12];  // 16 ymm registers: 12 chains and the two constants
    for (int k = 0; k < 12; ++k) a[k] = _mm256_set1_ps(1.0f + k);
    for (int64_t i = 0; i < iters; ++i)
      for (int k = 0; k < 12; ++k) a[k] = _mm256_fmadd_ps(a[k], x, y);
    alignas(32) float lanes[8];
    for (int k = 0; k < 12; ++k) {
      _mm256_store_ps(lanes, a[k]);
      for (float v : lanes) sink += v;
    }
  }
  const double took = since(start);
  return sink == sink ? took : -took;
}

__attribute__((target("avx512f,avx512bf16"))) double dpbf16_avx512(int64_t iters, int64_t threads) {
  float sink = 0.0f;
  const auto start = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3b80);  // bf16 2^-8 in every half: no denormals, no growth
    __m512 a[CHAINS];
    for (int k = 0; k < CHAINS; ++k) a[k] = _mm512_set1_ps(1.0f + k);
    for (int64_t i = 0; i < iters; ++i)
      for (int k = 0; k < CHAINS; ++k) a[k] = _mm512_dpbf16_ps(a[k], x, x);
    for (int k = 0; k < CHAINS; ++k) sink += _mm512_reduce_add_ps(a[k]);
  }
  const double took = since(start);
  return sink == sink ? took : -took;
}

namespace {

struct TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

bool amx_granted() {
  constexpr long REQUEST_PERMISSION = 0x1023, TILE_DATA = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, REQUEST_PERMISSION, TILE_DATA) == 0;
}

}  // namespace

__attribute__((target("amx-tile,amx-bf16"))) double amx_bf16(int64_t iters, int64_t threads) {
  if (!amx_granted()) return -1.0;
  float sink = 0.0f;
  const auto start = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    TileConfig config;
    for (int t = 0; t < 8; ++t) config.rows[t] = 16, config.colsb[t] = 64;  // 16 rows of 64 bytes each tile
    _tile_loadconfig(&config);
    alignas(64) uint16_t operand[16 * 32];
    for (auto& v : operand) v = 0x3b80;  // bf16 2^-8
    alignas(64) float result[16 * 16];
    _tile_loadd(4, operand, 64);
    _tile_loadd(5, operand, 64);
    _tile_loadd(6, operand, 64);
    _tile_loadd(7, operand, 64);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t i = 0; i < iters; ++i) {  // four accumulators, each fed by a different pair of operands
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, result, 64);
    sink += result[0];
    _tile_stored(3, result, 64);
    sink += result[255];
    _tile_release();
  }
  const double took = since(start);
  return sink == sink ? took : -took;
}

// Gather: hints 0 T0, 1 T1, 2 T2, 3 NTA.
int64_t lines_gather(torch::Tensor buffer, torch::Tensor ids, int64_t stride, int64_t read, int64_t ahead, int64_t hint,
                     int64_t threads) {
  check_rows(buffer, ids, stride, read);
  const char* base = static_cast<const char*>(buffer.data_ptr());
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t n = ids.numel();
  switch (hint) {
    case 0: return gather_with<0>(base, id, n, stride, read, ahead, threads);
    case 1: return gather_with<1>(base, id, n, stride, read, ahead, threads);
    case 2: return gather_with<2>(base, id, n, stride, read, ahead, threads);
    case 3: return gather_with<3>(base, id, n, stride, read, ahead, threads);
  }
  TORCH_CHECK(false, "gather hint: 0 (T0), 1 (T1), 2 (T2) or 3 (NTA)");
}

// Update: hints 0 T0, 4 W (prefetchw).
void lines_update(torch::Tensor buffer, torch::Tensor ids, int64_t stride, int64_t bytes, int64_t ahead, int64_t hint,
                  int64_t threads) {
  check_rows(buffer, ids, stride, bytes);
  char* base = static_cast<char*>(buffer.data_ptr());
  const int64_t* id = ids.data_ptr<int64_t>();
  if (hint == 0) return update_with<0>(base, id, ids.numel(), stride, bytes, ahead, threads);
  TORCH_CHECK(hint == 4, "update hint: 0 (T0) or 4 (W)");
  update_with<4>(base, id, ids.numel(), stride, bytes, ahead, threads);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("fma_avx512", &fma_avx512);
  m.def("fma_avx2", &fma_avx2);
  m.def("dpbf16_avx512", &dpbf16_avx512);
  m.def("amx_bf16", &amx_bf16);
  m.def("lines_gather", &lines_gather);
  m.def("lines_update", &lines_update);
}
