// Fused CPU embedding kernels (the SC20 techniques), compiled on first use.
//
// All tables live in one row-major matrix (table-batched); `ids` are global rows
// (table offset added) and `offsets` the T*B+1 bag starts, table-major: bag t*B+i
// is sample i of table t, and its pooled vector is out[i][t].
//
// Ids are not range-checked here: an id outside its table would read a neighbour
// table's row or memory past the end (forward), or fall in no thread's rows and be
// skipped (update). `SparseArch.check_ids` (base.py) refuses such a batch before any
// kernel runs, so the hot loops stay free of bounds checks.
//
// The update is fused with the backward: no sparse or dense gradient is built.
// Each thread owns a contiguous range of rows and applies only the updates that
// fall in it, so no two threads ever write the same row and no atomics are needed.
// A thread walks the bags in order, so repeated ids are applied in a fixed order
// and runs are deterministic.
//
// Precisions: fp32 weights, or Split-SGD bf16: the fp32 master weight is kept as
// its upper 16 bits `hi` (the bf16 weight forward and backward use) and its lower
// 16 bits `lo`; an update reassembles the fp32 value, applies, and splits again.
// A bf16 table is one int16 matrix of rows [hi | lo] (dim halves each): forward reads
// the first half of a row, an update reads and writes the whole row, so each id is one
// random access (two arrays would be two random streams of half the size).
//
// Software prefetch: every kernel that walks random rows asks for the row a few ids ahead
// (as fbgemm's EmbeddingSpMDM does), only the bytes it will touch. The updates too ask for
// reading (prefetcht0), not with write intent (prefetchw): on the Xeon with AMX it was measured
// on, the row read for reading and then written updates faster: dlrm-benchmark's 1.6M ids at 2
// threads in 25.9 against 32.3 ms in bf16, 22.2 against 31.0 ms in fp32 (the kernels side by side
// in one process), and the physical bound's probe finds the same (`dlrm-study bound`:
// `update_hint` t0 over w). Prefetching changes no result.

#include <torch/extension.h>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

// How far ahead to prefetch, in rows: random rows are latency-bound, a row asked for too late
// stalls the loop, too early is evicted before use. The distance is the machine's: the one its
// probe of independent rows found fastest (`measure/membench.py`, set per run by
// `measure/limits.use_prefetch` through `set_prefetch_rows`), for the forward's gather and for the
// update apart. Before any probe (-1) a kernel takes the rows in DEFAULT_BYTES of the bytes it
// touches (32 rows of 256 B, 64 half rows of 128 B), the distance found fastest on the machines
// this ran on before probes existed; 0 switches prefetching off.
constexpr int64_t DEFAULT_BYTES = 8192;
constexpr int64_t MOST_ROWS = 4096;  // a distance past this is no machine's (and keeps rows_ahead small)
enum Walk { GATHER = 0, UPDATE = 1 };
int64_t ahead_rows[2] = {-1, -1};

// Ids ahead for the walk `walk` over rows of which `touched` bytes are read or written (0: no prefetching).
inline int64_t rows_ahead(Walk walk, int64_t touched) {
  const int64_t set = ahead_rows[walk];
  return set >= 0 ? set : std::clamp<int64_t>(DEFAULT_BYTES / touched, 1, 256);
}

inline float bf16_to_float(int16_t hi) {
  uint32_t bits = static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float join(int16_t hi, int16_t lo) {
  uint32_t bits = (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16) | static_cast<uint16_t>(lo);
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline void split(float value, int16_t& hi, int16_t& lo) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  hi = static_cast<int16_t>(bits >> 16);
  lo = static_cast<int16_t>(bits & 0xffff);
}

struct Layout {
  const int64_t* ids;
  const int64_t* offsets;
  int64_t batch, tables, bags, dim, rows;
};

Layout layout(const torch::Tensor& ids, const torch::Tensor& offsets, int64_t batch, int64_t tables,
              int64_t dim, int64_t rows) {
  TORCH_CHECK(ids.dtype() == torch::kInt64 && offsets.dtype() == torch::kInt64, "ids and offsets must be int64");
  TORCH_CHECK(ids.is_contiguous() && offsets.is_contiguous(), "ids and offsets must be contiguous");
  TORCH_CHECK(offsets.numel() == batch * tables + 1, "offsets must hold tables * batch + 1 bag starts");
  return {ids.data_ptr<int64_t>(), offsets.data_ptr<int64_t>(), batch, tables, batch * tables, dim, rows};
}

// Pointer to the pooled output (or its gradient) of bag b = t * B + i, stored at [i][t].
inline int64_t out_row(const Layout& l, int64_t bag) {
  return (bag % l.batch) * l.tables + bag / l.batch;
}

// Prefetch every cache line of a row: a row is 128-512 bytes, the lines are not adjacent-line fetched.
inline void prefetch_row(const void* row, int64_t bytes, int write = 0) {
  const char* p = static_cast<const char*>(row);
  for (int64_t c = 0; c < bytes; c += 64) {
    if (write) __builtin_prefetch(p + c, 1);
    else __builtin_prefetch(p + c, 0);
  }
}

// One thread's bags of the pooled forward, [first, last): each bag's sum kept in `acc`, D
// floats the compiler holds in registers where D is a compile-time constant (D = 0: the
// dimension known at run time only, `dim`), written to the output once per bag. Ids are summed
// in bag order from 0.0f, two rows per step (acc + r0, then + r1: the same additions, in the same
// order, as one row at a time, so the sums are bit for bit those of the plain loop). Every line of
// the row `ahead` ids on is prefetched (across bag boundaries: with one id per bag, pooling factor
// 1, the bags themselves are the rows). The bag's output row [i][t] is stepped, not divided out.
template <int64_t D, typename T, typename Widen>
void pool_bags(const Layout& l, const T* table, int64_t stride, int64_t dim, Widen widen, float* o, int64_t first,
               int64_t last, int64_t ahead, int64_t read) {
  constexpr bool fixed = D > 0;
  const int64_t n = fixed ? D : dim, end = l.offsets[last];
  const char* bytes = reinterpret_cast<const char*>(table);
  float held[fixed ? D : 1];
  int64_t t = first / l.batch, i = first % l.batch;
  for (int64_t bag = first; bag < last; ++bag) {
    float* acc = fixed ? held : o + (i * l.tables + t) * n;
    for (int64_t d = 0; d < n; ++d) acc[d] = 0.0f;
    int64_t j = l.offsets[bag];
    const int64_t stop = l.offsets[bag + 1];
    for (; j + 1 < stop; j += 2) {
      if (ahead && j + 1 + ahead < end) {
        prefetch_row(bytes + l.ids[j + ahead] * stride * sizeof(T), read);
        prefetch_row(bytes + l.ids[j + 1 + ahead] * stride * sizeof(T), read);
      }
      const T* r0 = table + l.ids[j] * stride;
      const T* r1 = table + l.ids[j + 1] * stride;
      for (int64_t d = 0; d < n; ++d) acc[d] = acc[d] + widen(r0[d]) + widen(r1[d]);
    }
    if (j < stop) {
      if (ahead && j + ahead < end) prefetch_row(bytes + l.ids[j + ahead] * stride * sizeof(T), read);
      const T* r = table + l.ids[j] * stride;
      for (int64_t d = 0; d < n; ++d) acc[d] = acc[d] + widen(r[d]);
    }
    if (fixed) std::memcpy(o + (i * l.tables + t) * n, held, n * sizeof(float));
    if (++i == l.batch) i = 0, ++t;
  }
}

// The pooled forward over rows of `T` (`stride` elements apart, `dim` of each read, widened to
// float by `widen`): a contiguous range of bags per thread, dimension-specialised for the
// common embedding sizes (accumulators in registers), the general loop otherwise.
template <typename T, typename Widen>
torch::Tensor pooled_forward(const Layout& l, const T* table, int64_t stride, Widen widen) {
  // Not zero-filled up front: each bag's sum is written whole by its thread.
  auto out = torch::empty({l.batch, l.tables, l.dim}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  const int64_t read = l.dim * sizeof(T), ahead = rows_ahead(GATHER, read);
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = l.bags * me / threads, last = l.bags * (me + 1) / threads;
    switch (l.dim) {
      case 16: pool_bags<16>(l, table, stride, l.dim, widen, o, first, last, ahead, read); break;
      case 32: pool_bags<32>(l, table, stride, l.dim, widen, o, first, last, ahead, read); break;
      case 64: pool_bags<64>(l, table, stride, l.dim, widen, o, first, last, ahead, read); break;
      case 128: pool_bags<128>(l, table, stride, l.dim, widen, o, first, last, ahead, read); break;
      default: pool_bags<0>(l, table, stride, l.dim, widen, o, first, last, ahead, read);
    }
  }
  return out;
}

// Measured against this update, left for a change that re-measures the loop (scripts/kernel_pair.py: the two
// kernels side by side in one process over dlrm-benchmark's own steps, 21-31 rounds each; a Zen 4 at 2 threads,
// 2026-12-06). The bucketing below (count and scatter) is 3.5-4.2 ms of a 44-52 ms update. The rows' order is
// not the rest: the bound's update probe walks this kernel's own ids, every id in bag order, repeats included,
// in 29.6-31.3 ms a step (210-222 M lines/s): 7-14% over the step's unique rows sorted (27.5-27.7 ms), about its
// 11% more ids (two runs of scripts/update_walks.py). The rest is the work per id, in small parts: the probe's
// bare integer add in place of Split-SGD's join, step and split, 10% faster (bf16); no gradient row read, 2-5%.
// 8-byte pairs (32-bit row and bag): from 9% slower to 15% faster over three runs, no steady
// gain. Each thread's pairs stably radix-sorted by row first: 42-45% slower (the sort costs, the order gives
// little). No bucketing, every thread scanning every id for its own: 1-9% faster over two runs, but each thread
// then reads all the ids, a cost that grows with the thread count this bucketing was built for (9228bb9).
struct Pair {
  int64_t row, grad;  // a looked-up row, and where its bag's gradient starts
};

struct Owned {
  const Pair* pairs;
  int64_t size;
};

// Which thread owns a row: rows split into `threads` contiguous ranges, found by one 128-bit
// multiply (no division per id). An id past the table (refused before any kernel runs, see
// above) maps to `threads`: no thread's, skipped.
struct Owners {
  unsigned __int128 factor;
  int64_t threads;
  int64_t of(int64_t row) const {
    const auto wide = static_cast<unsigned __int128>(static_cast<uint64_t>(row));
    const uint64_t owner = static_cast<uint64_t>((wide * factor) >> 64);
    return static_cast<int64_t>(std::min<uint64_t>(owner, threads));
  }
};

// The ids bucketed by owner in one pass shared by the threads (not every thread scanning all
// ids): each thread counts the ids of its share of the bags per owner, a prefix sum places the
// buckets, each thread writes its ids into them. An owner's bucket holds thread 0's share, then
// thread 1's, ...: its ids in bag order, as a walk of all ids would find them, so the updates
// apply in the same order as ever (deterministic, bit for bit). `buffer`: n pairs; `counts`:
// (threads + 1) x (threads + 1) slots; both shared by the team, which every thread must call this in.
Owned bucketed_pairs(const Layout& l, Pair* buffer, int64_t* counts, int64_t me, int64_t threads) {
  const int64_t slots = threads + 1;  // the last bucket: ids no thread owns
  const Owners owners{(static_cast<unsigned __int128>(threads) << 64) / static_cast<uint64_t>(l.rows), threads};
  const int64_t first = l.bags * me / threads, last = l.bags * (me + 1) / threads;
  int64_t* mine = counts + me * slots;
  std::fill(mine, mine + slots, 0);
  for (int64_t j = l.offsets[first]; j < l.offsets[last]; ++j) ++mine[owners.of(l.ids[j])];
#pragma omp barrier
#pragma omp single
  {
    int64_t at = 0;  // counts[s][o] becomes where thread s's ids owned by o start
    for (int64_t o = 0; o < slots; ++o)
      for (int64_t source = 0; source < threads; ++source) {
        std::swap(counts[source * slots + o], at);
        at += counts[source * slots + o];
      }
  }  // implicit barrier: every thread sees the starts
  int64_t t = first / l.batch, i = first % l.batch;
  for (int64_t bag = first; bag < last; ++bag) {
    const int64_t g = (i * l.tables + t) * l.dim;
    for (int64_t j = l.offsets[bag]; j < l.offsets[bag + 1]; ++j) {
      buffer[mine[owners.of(l.ids[j])]++] = {l.ids[j], g};
    }
    if (++i == l.batch) i = 0, ++t;
  }
#pragma omp barrier
  // After the scatter, counts[s][o] is where thread s's ids owned by o end: bucket o ends at counts[threads-1][o].
  const int64_t begin = me == 0 ? 0 : counts[(threads - 1) * slots + me - 1];
  return {buffer + begin, counts[(threads - 1) * slots + me] - begin};
}

// The buffers `bucketed_pairs` shares: kept by the calling thread between calls (no page faults, no zero-fill).
struct Shared {
  Pair* pairs;
  int64_t* counts;
};

Shared shared_buffers(const Layout& l, int64_t threads) {
  static thread_local std::vector<Pair> pairs;
  static thread_local std::vector<int64_t> counts;
  const size_t n = l.offsets[l.bags];
  if (pairs.size() < n) pairs.resize(n);
  counts.resize((threads + 1) * (threads + 1));
  return {pairs.data(), counts.data()};
}

// Calls update(row, grad_row) for every looked-up id, on the thread that owns the row
// (`touched`: the bytes of a row the update reads and writes).
template <typename Prefetch, typename Update>
void owned_rows_update(const Layout& l, const float* grad, int64_t touched, Prefetch prefetch, Update update) {
  if (l.rows == 0) return;  // no row to update (and no range to split)
  const int64_t most = omp_get_max_threads();
  const Shared shared = shared_buffers(l, most);
#pragma omp parallel num_threads(most)
  {
    const Owned mine = bucketed_pairs(l, shared.pairs, shared.counts, omp_get_thread_num(), omp_get_num_threads());
    const int64_t n = mine.size, ahead = rows_ahead(UPDATE, touched);
    for (int64_t k = 0; k < n; ++k) {
      if (ahead && k + ahead < n) prefetch(mine.pairs[k + ahead].row);
      update(mine.pairs[k].row, grad + mine.pairs[k].grad);
    }
  }
}

// Row-wise Adagrad needs each row's gradient summed over its repeats first: every
// thread sorts its own (row, gradient) pairs and updates each distinct row once.
template <typename Prefetch, typename Update>
void owned_rows_summed_update(const Layout& l, const float* grad, int64_t touched, Prefetch prefetch, Update update) {
  if (l.rows == 0) return;
  const int64_t most = omp_get_max_threads();
  const Shared shared = shared_buffers(l, most);
#pragma omp parallel num_threads(most)
  {
    const Owned owned = bucketed_pairs(l, shared.pairs, shared.counts, omp_get_thread_num(), omp_get_num_threads());
    std::vector<Pair> mine(owned.pairs, owned.pairs + owned.size);
    std::stable_sort(mine.begin(), mine.end(), [](const Pair& a, const Pair& b) { return a.row < b.row; });
    std::vector<float> sum(l.dim);
    const size_t ahead = rows_ahead(UPDATE, touched);
    for (size_t k = 0; k < mine.size();) {
      const int64_t row = mine[k].row;
      if (ahead && k + ahead < mine.size()) prefetch(mine[k + ahead].row);
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (; k < mine.size() && mine[k].row == row; ++k) {
        const float* g = grad + mine[k].grad;
        for (int64_t d = 0; d < l.dim; ++d) sum[d] += g[d];
      }
      update(row, sum.data());
    }
  }
}

// Row-wise Adagrad: accumulate the row's mean squared (summed) gradient, return its step size.
inline float adagrad_scale(float& momentum, const float* g, int64_t dim, float lr, float eps) {
  float square = 0.0f;
#pragma omp simd reduction(+ : square)
  for (int64_t d = 0; d < dim; ++d) square += g[d] * g[d];
  momentum += square / dim;
  return lr / (std::sqrt(momentum) + eps);
}

void check_grad(const torch::Tensor& grad, const Layout& l) {
  TORCH_CHECK(grad.dtype() == torch::kFloat32 && grad.is_contiguous(), "grad must be contiguous fp32");
  TORCH_CHECK(grad.numel() == l.bags * l.dim, "grad must be (batch, tables, dim)");
}

}  // namespace

torch::Tensor forward_fp32(torch::Tensor weight, torch::Tensor ids, torch::Tensor offsets, int64_t batch,
                           int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, weight.size(1), weight.size(0));
  TORCH_CHECK(weight.is_contiguous(), "weight must be contiguous");
  return pooled_forward(l, weight.data_ptr<float>(), l.dim, [](float v) { return v; });
}

// `hi`: (rows, dim) bf16 bits, rows `hi.stride(0)` apart: a plain table, or the upper
// halves of a Split-SGD table ([hi | lo] rows, `table[:, :dim]`), whose lower halves
// forward never reads (nor prefetches).
torch::Tensor forward_bf16(torch::Tensor hi, torch::Tensor ids, torch::Tensor offsets, int64_t batch,
                           int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, hi.size(1), hi.size(0));
  TORCH_CHECK(hi.dtype() == torch::kInt16 && hi.stride(1) == 1, "hi must be int16 with contiguous rows");
  return pooled_forward(l, hi.data_ptr<int16_t>(), hi.stride(0), [](int16_t h) { return bf16_to_float(h); });
}

void sgd_fp32(torch::Tensor weight, torch::Tensor ids, torch::Tensor offsets, torch::Tensor grad, double lr,
              int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, weight.size(1), weight.size(0));
  TORCH_CHECK(weight.is_contiguous(), "weight must be contiguous");
  check_grad(grad, l);
  float* w = weight.data_ptr<float>();
  const float step = static_cast<float>(lr);
  const int64_t dim = l.dim;
  const auto prefetch = [=](int64_t row) { prefetch_row(w + row * dim, dim * sizeof(float)); };
  const auto update = [=](int64_t row, const float* __restrict__ g) {
    float* __restrict__ r = w + row * dim;
    for (int64_t d = 0; d < dim; ++d) r[d] -= step * g[d];
  };
  owned_rows_update(l, grad.data_ptr<float>(), dim * sizeof(float), prefetch, update);
}

// A Split-SGD table: (rows, 2 * dim) int16, each row [hi | lo].
int64_t split_dim(const torch::Tensor& table) {
  TORCH_CHECK(table.dtype() == torch::kInt16 && table.is_contiguous() && table.size(1) % 2 == 0,
              "a Split-SGD table is contiguous int16 (rows, 2 * dim): [hi | lo] per row");
  return table.size(1) / 2;
}

void sgd_split_bf16(torch::Tensor table, torch::Tensor ids, torch::Tensor offsets, torch::Tensor grad, double lr,
                    int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, split_dim(table), table.size(0));
  check_grad(grad, l);
  int16_t* w = table.data_ptr<int16_t>();
  const float step = static_cast<float>(lr);
  const int64_t dim = l.dim;
  // One row holds both halves: one random access, as many bytes as an fp32 row.
  const auto prefetch = [=](int64_t row) { prefetch_row(w + row * 2 * dim, 2 * dim * sizeof(int16_t)); };
  const auto update = [=](int64_t row, const float* __restrict__ g) {
    int16_t* __restrict__ rh = w + row * 2 * dim;
    int16_t* __restrict__ rl = rh + dim;
    for (int64_t d = 0; d < dim; ++d) split(join(rh[d], rl[d]) - step * g[d], rh[d], rl[d]);
  };
  owned_rows_update(l, grad.data_ptr<float>(), 2 * dim * sizeof(int16_t), prefetch, update);
}

void rowwise_adagrad_fp32(torch::Tensor weight, torch::Tensor momentum, torch::Tensor ids, torch::Tensor offsets,
                          torch::Tensor grad, double lr, double eps, int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, weight.size(1), weight.size(0));
  TORCH_CHECK(weight.is_contiguous(), "weight must be contiguous");
  check_grad(grad, l);
  float* w = weight.data_ptr<float>();
  float* m = momentum.data_ptr<float>();
  const float step = static_cast<float>(lr), epsilon = static_cast<float>(eps);
  const int64_t dim = l.dim;
  const auto prefetch = [=](int64_t row) {
    prefetch_row(w + row * dim, dim * sizeof(float));
    prefetch_row(m + row, sizeof(float));
  };
  const auto update = [=](int64_t row, const float* g) {
    const float scale = adagrad_scale(m[row], g, dim, step, epsilon);
    float* r = w + row * dim;
    for (int64_t d = 0; d < dim; ++d) r[d] -= scale * g[d];
  };
  owned_rows_summed_update(l, grad.data_ptr<float>(), dim * sizeof(float), prefetch, update);
}

void rowwise_adagrad_split_bf16(torch::Tensor table, torch::Tensor momentum, torch::Tensor ids, torch::Tensor offsets,
                                torch::Tensor grad, double lr, double eps, int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, split_dim(table), table.size(0));
  check_grad(grad, l);
  int16_t* w = table.data_ptr<int16_t>();
  float* m = momentum.data_ptr<float>();
  const float step = static_cast<float>(lr), epsilon = static_cast<float>(eps);
  const int64_t dim = l.dim;
  const auto prefetch = [=](int64_t row) {
    prefetch_row(w + row * 2 * dim, 2 * dim * sizeof(int16_t));
    prefetch_row(m + row, sizeof(float));
  };
  const auto update = [=](int64_t row, const float* g) {
    const float scale = adagrad_scale(m[row], g, dim, step, epsilon);
    int16_t* rh = w + row * 2 * dim;
    int16_t* rl = rh + dim;
    for (int64_t d = 0; d < dim; ++d) split(join(rh[d], rl[d]) - scale * g[d], rh[d], rl[d]);
  };
  owned_rows_summed_update(l, grad.data_ptr<float>(), 2 * dim * sizeof(int16_t), prefetch, update);
}

// The memory system's limits at the embedding kernels' access pattern, for the roofline
// (`measure/membench.py`): probes of the physical limit, not copies of a kernel's design.
// Uniform random rows, each independent of the others (no row waits on another, no
// accumulator in memory: each row's words go into 8 lanes the compiler keeps in one
// register), every line of a row prefetched `ahead` rows ahead (0: none), the ids split
// evenly over the threads. One integer add per 4-byte word: no float rounding,
// denormals or conversions to wait on. Ids are not checked (a pass over them would be
// timed): the caller draws them within the buffer.
//
// Gather: read `read` bytes of each row (rows `stride` bytes apart). Returns a checksum
// (so the reads cannot be optimised away).
int64_t membench_gather(torch::Tensor buffer, torch::Tensor ids, int64_t stride, int64_t read, int64_t ahead) {
  TORCH_CHECK(ids.dtype() == torch::kInt64 && ids.is_contiguous() && ahead >= 0, "ids: contiguous int64, ahead >= 0");
  TORCH_CHECK(read % 4 == 0 && read > 0 && read <= stride && read <= 4096, "read: 4..4096 bytes, within a row");
  const char* base = static_cast<const char*>(buffer.data_ptr());
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t n = ids.numel(), words = read / 4, whole = words / 8 * 8;
  uint64_t sum = 0;
#pragma omp parallel reduction(+ : sum)
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = n * me / threads, last = n * (me + 1) / threads;
    uint32_t acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t j = first; j < last; ++j) {
      if (ahead && j + ahead < last) prefetch_row(base + id[j + ahead] * stride, read);
      const uint32_t* r = reinterpret_cast<const uint32_t*>(base + id[j] * stride);
      for (int64_t d = 0; d < whole; d += 8)
        for (int k = 0; k < 8; ++k) acc[k] += r[d + k];
      for (int64_t d = whole; d < words; ++d) acc[d & 7] += r[d];
    }
    for (int k = 0; k < 8; ++k) sum += acc[k];
  }
  return static_cast<int64_t>(sum);
}

// Stream: read the first `bytes` of the buffer once, in order, split evenly over the threads
// (the interaction's features and gradients: the bound's memory term). Returns a checksum.
int64_t membench_stream(torch::Tensor buffer, int64_t bytes) {
  TORCH_CHECK(bytes % 64 == 0 && bytes > 0 && bytes <= buffer.numel() * buffer.element_size(),
              "bytes: whole 64-byte lines within the buffer");
  const uint32_t* base = static_cast<const uint32_t*>(buffer.data_ptr());
  const int64_t lines = bytes / 64;
  uint64_t sum = 0;
#pragma omp parallel reduction(+ : sum)
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    uint32_t acc[32] = {};  // two lines in flight per step: independent lanes, no dependency chain
    int64_t c = lines * me / threads;
    const int64_t last = lines * (me + 1) / threads;
    for (; c + 1 < last; c += 2)
      for (int k = 0; k < 32; ++k) acc[k] += base[c * 16 + k];
    for (; c < last; ++c)
      for (int k = 0; k < 16; ++k) acc[k] += base[c * 16 + k];
    for (int k = 0; k < 32; ++k) sum += acc[k];
  }
  return static_cast<int64_t>(sum);
}

// Latency: a dependent walk of `steps` hops through `next` (a random cycle over the rows,
// `stride` bytes apart): each load waits for the one before, so the time per hop is the
// memory's latency at this footprint (Little's law: lines in flight = lines/s x latency).
// Returns ns per hop; the links are written into the rows first, outside the timed walk.
double membench_chase(torch::Tensor buffer, torch::Tensor next, int64_t stride, int64_t steps) {
  TORCH_CHECK(next.dtype() == torch::kInt64 && next.is_contiguous() && stride % 8 == 0 && steps > 0,
              "next: contiguous int64; stride: a multiple of 8; steps > 0");
  TORCH_CHECK(next.numel() * stride <= buffer.numel() * buffer.element_size(), "next: rows within the buffer");
  char* base = static_cast<char*>(buffer.data_ptr());
  const int64_t* to = next.data_ptr<int64_t>();
  for (int64_t r = 0; r < next.numel(); ++r) *reinterpret_cast<int64_t*>(base + r * stride) = to[r] * stride;
  const auto start = std::chrono::steady_clock::now();
  int64_t at = 0;
  for (int64_t s = 0; s < steps; ++s) at = *reinterpret_cast<const volatile int64_t*>(base + at);
  const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
  TORCH_CHECK(at >= 0, "the walk left the buffer");  // uses `at`: the walk cannot be optimised away
  return took.count() / steps;
}

// Update: read-modify-write `bytes` of each row (one integer add per word), prefetched with
// write intent (prefetchw: the line comes owned), the ids split evenly over the threads (a
// race on a repeated row changes the sum, not the traffic). No ownership pass: a bound
// charges the traffic, not a kernel's way of keeping threads apart.
void membench_update(torch::Tensor buffer, torch::Tensor ids, int64_t stride, int64_t bytes, int64_t ahead) {
  TORCH_CHECK(ids.dtype() == torch::kInt64 && ids.is_contiguous(), "ids: contiguous int64");
  TORCH_CHECK(bytes % 4 == 0 && bytes > 0 && bytes <= stride && bytes <= 4096, "bytes: 4..4096, within a row");
  char* base = static_cast<char*>(buffer.data_ptr());
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t n = ids.numel(), words = bytes / 4;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = n * me / threads, last = n * (me + 1) / threads;
    for (int64_t j = first; j < last; ++j) {
      if (ahead && j + ahead < last) prefetch_row(base + id[j + ahead] * stride, bytes, 1);
      uint32_t* __restrict__ r = reinterpret_cast<uint32_t*>(base + id[j] * stride);
      for (int64_t d = 0; d < words; ++d) r[d] += static_cast<uint32_t>(d | 1);
    }
  }
}

// The kernels' prefetch distances in rows ahead, {gather, update} (0: off, -1: the default of
// DEFAULT_BYTES); returns the previous pair. Set per run from the machine's probe (see above).
std::vector<int64_t> set_prefetch_rows(int64_t gather, int64_t update) {
  TORCH_CHECK(gather >= -1 && update >= -1 && gather <= MOST_ROWS && update <= MOST_ROWS,
              "a prefetch distance is -1 (the default), 0 (off) or rows ahead, at most ", MOST_ROWS);
  std::vector<int64_t> previous{ahead_rows[GATHER], ahead_rows[UPDATE]};
  ahead_rows[GATHER] = gather;
  ahead_rows[UPDATE] = update;
  return previous;
}

// The distances the kernels run at a row size: {gather, update} rows ahead for rows of which
// `gather_bytes` are read and `update_bytes` read and written (what records say ran).
std::vector<int64_t> prefetch_rows(int64_t gather_bytes, int64_t update_bytes) {
  TORCH_CHECK(gather_bytes > 0 && update_bytes > 0, "row bytes must be > 0");
  return {rows_ahead(GATHER, gather_bytes), rows_ahead(UPDATE, update_bytes)};
}

// Fused dot interaction: for each sample, the dots of every pair of distinct features
// (feature 0 the bottom-MLP output, 1..T the pooled embeddings), lower triangle in row
// order, after the dense vector: out = [dense, f1.f0, f2.f0, f2.f1, ...]. No (F, F)
// matrix, no gather of its triangle; backward accumulates each pair into both features.
// Dots and gradients are fused multiply-adds: they round differently from bmm's (within the
// error bound of a dot of `dim` terms, which the tests check), not bit for bit.
//
// The dense vector, the output and its gradient are fp32, or bf16 in the bf16 loop (T, its
// bottom MLP's dtype): a bf16 one is widened exactly and every sum kept in fp32, then rounded
// once to bf16 (nearest even, as torch's cast), so the results are bit for bit those of casts
// around the fp32 kernel (the tests), without the casts' passes. The pooled embeddings, and
// their gradient, are fp32 either way.
template <typename T>
inline const float* widened(const T* x, float* wide, int64_t dim) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    for (int64_t d = 0; d < dim; ++d) wide[d] = static_cast<float>(x[d]);
    return wide;
  }
}

template <typename T>
torch::Tensor interaction_forward_as(const torch::Tensor& dense, const torch::Tensor& pooled) {
  const int64_t batch = pooled.size(0), tables = pooled.size(1), dim = pooled.size(2), features = tables + 1;
  const int64_t width = dim + features * (features - 1) / 2;
  auto out = torch::empty({batch, width}, dense.options());
  const T* x = dense.data_ptr<T>();
  const float* e = pooled.data_ptr<float>();
  T* o = out.data_ptr<T>();
#pragma omp parallel
  {
    std::vector<float> wide(dim);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      const float* f0 = widened(x + b * dim, wide.data(), dim);
      const float* fe = e + b * tables * dim;  // feature i >= 1 is fe + (i - 1) * dim
      T* row = o + b * width;
      std::memcpy(row, x + b * dim, dim * sizeof(T));
      int64_t p = dim;
      for (int64_t i = 1; i < features; ++i) {
        const float* fi = fe + (i - 1) * dim;
        for (int64_t j = 0; j < i; ++j) {
          const float* fj = j == 0 ? f0 : fe + (j - 1) * dim;
          float dot = 0.0f;
          // Fused multiply-adds (one rounding per term, not two: -ffp-contract=off leaves explicit
          // fma alone) in vector lanes, then the lanes summed as a tree by the compiler's reduction.
#pragma omp simd reduction(+ : dot)
          for (int64_t d = 0; d < dim; ++d) dot = std::fma(fi[d], fj[d], dot);
          row[p++] = static_cast<T>(dot);
        }
      }
    }
  }
  return out;
}

template <typename T>
std::vector<torch::Tensor> interaction_backward_as(const torch::Tensor& dense, const torch::Tensor& pooled,
                                                   const torch::Tensor& grad) {
  const int64_t batch = pooled.size(0), tables = pooled.size(1), dim = pooled.size(2), features = tables + 1;
  const int64_t width = grad.size(1);
  auto grad_dense = torch::empty_like(dense);
  auto grad_pooled = torch::empty_like(pooled);  // zeroed sample by sample below, in cache
  const T* x = dense.data_ptr<T>();
  const float* e = pooled.data_ptr<float>();
  const T* g = grad.data_ptr<T>();
  T* gx = grad_dense.data_ptr<T>();
  float* ge = grad_pooled.data_ptr<float>();
#pragma omp parallel
  {
    std::vector<float> wide(dim), sum(dim);  // the dense vector widened; its gradient's fp32 sums
#pragma omp for schedule(static)
    for (int64_t b = 0; b < batch; ++b) {
      const float* f0 = widened(x + b * dim, wide.data(), dim);
      const float* fe = e + b * tables * dim;
      const T* row = g + b * width;
      float* g0 = sum.data();
      for (int64_t d = 0; d < dim; ++d) g0[d] = static_cast<float>(row[d]);  // the dense part passes straight through
      float* gf = ge + b * tables * dim;
      std::fill(gf, gf + tables * dim, 0.0f);
      int64_t p = dim;
      for (int64_t i = 1; i < features; ++i) {
        const float* fi = fe + (i - 1) * dim;
        float* gi = gf + (i - 1) * dim;
        for (int64_t j = 0; j < i; ++j) {
          const float* fj = j == 0 ? f0 : fe + (j - 1) * dim;
          float* gj = j == 0 ? g0 : gf + (j - 1) * dim;
          const float s = static_cast<float>(row[p++]);
          for (int64_t d = 0; d < dim; ++d) {
            gi[d] = std::fma(s, fj[d], gi[d]);
            gj[d] = std::fma(s, fi[d], gj[d]);
          }
        }
      }
      for (int64_t d = 0; d < dim; ++d) gx[b * dim + d] = static_cast<T>(g0[d]);
    }
  }
  return {grad_dense, grad_pooled};
}

void check_interaction(const torch::Tensor& dense, const torch::Tensor& pooled) {
  TORCH_CHECK(pooled.dtype() == torch::kFloat32 && pooled.dim() == 3, "interaction: pooled must be fp32 (B, T, D)");
  TORCH_CHECK(dense.dtype() == torch::kFloat32 || dense.dtype() == torch::kBFloat16,
              "interaction: dense must be fp32 or bf16");
  TORCH_CHECK(dense.dim() == 2 && dense.size(0) == pooled.size(0) && dense.size(1) == pooled.size(2),
              "interaction: dense must be (B, D)");
}

torch::Tensor interaction_forward(torch::Tensor dense, torch::Tensor pooled) {
  check_interaction(dense, pooled);
  dense = dense.contiguous();
  pooled = pooled.contiguous();
  if (dense.dtype() == torch::kBFloat16) return interaction_forward_as<at::BFloat16>(dense, pooled);
  return interaction_forward_as<float>(dense, pooled);
}

// `grad`: the output's gradient, in the dense vector's dtype (the output's).
std::vector<torch::Tensor> interaction_backward(torch::Tensor dense, torch::Tensor pooled, torch::Tensor grad) {
  check_interaction(dense, pooled);
  TORCH_CHECK(grad.dtype() == dense.dtype() && grad.dim() == 2 && grad.size(0) == dense.size(0),
              "interaction: grad must be (B, width) in the dense vector's dtype");
  dense = dense.contiguous();
  pooled = pooled.contiguous();
  grad = grad.contiguous();
  if (dense.dtype() == torch::kBFloat16) return interaction_backward_as<at::BFloat16>(dense, pooled, grad);
  return interaction_backward_as<float>(dense, pooled, grad);
}

// Split-SGD for dense parameters: `hi` (the bf16 parameter, as int16 bits) and `lo` hold an
// fp32 master weight; grad is the parameter's bf16 gradient (int16 bits).
void split_sgd_dense(torch::Tensor hi, torch::Tensor lo, torch::Tensor grad, double lr) {
  TORCH_CHECK(hi.is_contiguous() && lo.is_contiguous() && grad.is_contiguous(), "contiguous tensors expected");
  TORCH_CHECK(hi.numel() == lo.numel() && hi.numel() == grad.numel(), "hi, lo and grad differ in size");
  int16_t* __restrict__ h = hi.data_ptr<int16_t>();
  int16_t* __restrict__ o = lo.data_ptr<int16_t>();
  const int16_t* __restrict__ g = grad.data_ptr<int16_t>();
  const float step = static_cast<float>(lr);
  const int64_t n = hi.numel();
#pragma omp parallel for simd schedule(static)
  for (int64_t k = 0; k < n; ++k) split(join(h[k], o[k]) - step * bf16_to_float(g[k]), h[k], o[k]);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward_fp32", &forward_fp32);
  m.def("forward_bf16", &forward_bf16);
  m.def("sgd_fp32", &sgd_fp32);
  m.def("sgd_split_bf16", &sgd_split_bf16);
  m.def("rowwise_adagrad_fp32", &rowwise_adagrad_fp32);
  m.def("rowwise_adagrad_split_bf16", &rowwise_adagrad_split_bf16);
  m.def("split_sgd_dense", &split_sgd_dense);
  m.def("membench_gather", &membench_gather);
  m.def("membench_update", &membench_update);
  m.def("membench_stream", &membench_stream);
  m.def("membench_chase", &membench_chase);
  m.def("set_prefetch_rows", &set_prefetch_rows);
  m.def("prefetch_rows", &prefetch_rows);
  m.def("interaction_forward", &interaction_forward);
  m.def("interaction_backward", &interaction_backward);
}
