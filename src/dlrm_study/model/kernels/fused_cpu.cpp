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

#include <torch/extension.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

namespace {

// How far ahead to prefetch, in bytes of rows: random gathers are latency-bound, but
// more lines in flight than the core can track are dropped (16 rows of 256 B here).
constexpr int64_t kPrefetchBytes = 4096;

inline int64_t rows_ahead(int64_t row_bytes) { return std::max<int64_t>(2, kPrefetchBytes / row_bytes); }

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

template <typename Load>
torch::Tensor pooled_forward(const Layout& l, Load load, const void* base, int64_t row_bytes) {
  // Not zero-filled up front: each bag's row is zeroed by its thread just before it sums
  // into it, while the row is in cache (a separate fill of a large output costs a pass).
  auto out = torch::empty({l.batch, l.tables, l.dim}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  const char* table = static_cast<const char*>(base);
#pragma omp parallel
  {
    // A contiguous range of bags per thread; prefetch runs ahead across bag boundaries,
    // which matters when bags hold one id (pooling factor 1).
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t first = l.bags * me / threads, last = l.bags * (me + 1) / threads;
    const int64_t end = l.offsets[last], ahead = rows_ahead(row_bytes);
    for (int64_t bag = first; bag < last; ++bag) {
      float* acc = o + out_row(l, bag) * l.dim;
      std::fill(acc, acc + l.dim, 0.0f);
      for (int64_t j = l.offsets[bag]; j < l.offsets[bag + 1]; ++j) {
        if (j + ahead < end) prefetch_row(table + l.ids[j + ahead] * row_bytes, row_bytes);
        load(acc, l.ids[j]);
      }
    }
  }
  return out;
}

// The (row, bag) pairs whose row this thread owns, in bag order: one cheap pass over
// the ids, so the update loop below touches only its own rows and can prefetch them.
std::vector<std::pair<int64_t, int64_t>> owned_pairs(const Layout& l, int64_t me, int64_t threads) {
  const int64_t first = l.rows * me / threads, last = l.rows * (me + 1) / threads;
  std::vector<std::pair<int64_t, int64_t>> mine;
  mine.reserve(l.offsets[l.bags] / threads + 1024);
  for (int64_t bag = 0; bag < l.bags; ++bag)
    for (int64_t j = l.offsets[bag]; j < l.offsets[bag + 1]; ++j)
      if (l.ids[j] >= first && l.ids[j] < last) mine.emplace_back(l.ids[j], bag);
  return mine;
}

// Calls update(row, grad_row) for every looked-up id, on the thread that owns the row.
template <typename Prefetch, typename Update>
void owned_rows_update(const Layout& l, const float* grad, int64_t row_bytes, Prefetch prefetch, Update update) {
#pragma omp parallel
  {
    const auto mine = owned_pairs(l, omp_get_thread_num(), omp_get_num_threads());
    const int64_t n = static_cast<int64_t>(mine.size()), ahead = rows_ahead(row_bytes);
    for (int64_t k = 0; k < n; ++k) {
      if (k + ahead < n) prefetch(mine[k + ahead].first);
      update(mine[k].first, grad + out_row(l, mine[k].second) * l.dim);
    }
  }
}

// Row-wise Adagrad needs each row's gradient summed over its repeats first: every
// thread sorts its own (row, bag) pairs and updates each distinct row once.
template <typename Update>
void owned_rows_summed_update(const Layout& l, const float* grad, Update update) {
#pragma omp parallel
  {
    auto mine = owned_pairs(l, omp_get_thread_num(), omp_get_num_threads());
    std::stable_sort(mine.begin(), mine.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<float> sum(l.dim);
    for (size_t k = 0; k < mine.size();) {
      const int64_t row = mine[k].first;
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (; k < mine.size() && mine[k].first == row; ++k) {
        const float* g = grad + out_row(l, mine[k].second) * l.dim;
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
  const float* w = weight.data_ptr<float>();
  const int64_t dim = l.dim;
  return pooled_forward(
      l,
      [=](float* acc, int64_t row) {
        const float* r = w + row * dim;
        for (int64_t d = 0; d < dim; ++d) acc[d] += r[d];
      },
      w, dim * sizeof(float));
}

torch::Tensor forward_bf16(torch::Tensor hi, torch::Tensor ids, torch::Tensor offsets, int64_t batch,
                           int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, hi.size(1), hi.size(0));
  const int16_t* h = hi.data_ptr<int16_t>();
  const int64_t dim = l.dim;
  return pooled_forward(
      l,
      [=](float* acc, int64_t row) {
        const int16_t* r = h + row * dim;
        for (int64_t d = 0; d < dim; ++d) acc[d] += bf16_to_float(r[d]);
      },
      h, dim * sizeof(int16_t));
}

void sgd_fp32(torch::Tensor weight, torch::Tensor ids, torch::Tensor offsets, torch::Tensor grad, double lr,
              int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, weight.size(1), weight.size(0));
  check_grad(grad, l);
  float* w = weight.data_ptr<float>();
  const float step = static_cast<float>(lr);
  const int64_t dim = l.dim;
  const auto prefetch = [=](int64_t row) { prefetch_row(w + row * dim, dim * sizeof(float), 1); };
  owned_rows_update(l, grad.data_ptr<float>(), dim * sizeof(float), prefetch, [=](int64_t row, const float* __restrict__ g) {
    float* __restrict__ r = w + row * dim;
    for (int64_t d = 0; d < dim; ++d) r[d] -= step * g[d];
  });
}

void sgd_split_bf16(torch::Tensor hi, torch::Tensor lo, torch::Tensor ids, torch::Tensor offsets,
                    torch::Tensor grad, double lr, int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, hi.size(1), hi.size(0));
  check_grad(grad, l);
  int16_t* h = hi.data_ptr<int16_t>();
  int16_t* o = lo.data_ptr<int16_t>();
  const float step = static_cast<float>(lr);
  const int64_t dim = l.dim;
  // The upper and lower halves are two random streams: prefetch both.
  const auto prefetch = [=](int64_t row) {
    prefetch_row(h + row * dim, dim * sizeof(int16_t), 1);
    prefetch_row(o + row * dim, dim * sizeof(int16_t), 1);
  };
  // Both halves together are as many bytes as an fp32 row.
  owned_rows_update(l, grad.data_ptr<float>(), dim * sizeof(float), prefetch, [=](int64_t row, const float* __restrict__ g) {
    int16_t* __restrict__ rh = h + row * dim;
    int16_t* __restrict__ rl = o + row * dim;
    for (int64_t d = 0; d < dim; ++d) split(join(rh[d], rl[d]) - step * g[d], rh[d], rl[d]);
  });
}

void rowwise_adagrad_fp32(torch::Tensor weight, torch::Tensor momentum, torch::Tensor ids, torch::Tensor offsets,
                          torch::Tensor grad, double lr, double eps, int64_t batch, int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, weight.size(1), weight.size(0));
  check_grad(grad, l);
  float* w = weight.data_ptr<float>();
  float* m = momentum.data_ptr<float>();
  const float step = static_cast<float>(lr), epsilon = static_cast<float>(eps);
  const int64_t dim = l.dim;
  owned_rows_summed_update(l, grad.data_ptr<float>(), [=](int64_t row, const float* g) {
    const float scale = adagrad_scale(m[row], g, dim, step, epsilon);
    float* r = w + row * dim;
    for (int64_t d = 0; d < dim; ++d) r[d] -= scale * g[d];
  });
}

void rowwise_adagrad_split_bf16(torch::Tensor hi, torch::Tensor lo, torch::Tensor momentum, torch::Tensor ids,
                                torch::Tensor offsets, torch::Tensor grad, double lr, double eps, int64_t batch,
                                int64_t tables) {
  const auto l = layout(ids, offsets, batch, tables, hi.size(1), hi.size(0));
  check_grad(grad, l);
  int16_t* h = hi.data_ptr<int16_t>();
  int16_t* o = lo.data_ptr<int16_t>();
  float* m = momentum.data_ptr<float>();
  const float step = static_cast<float>(lr), epsilon = static_cast<float>(eps);
  const int64_t dim = l.dim;
  owned_rows_summed_update(l, grad.data_ptr<float>(), [=](int64_t row, const float* g) {
    const float scale = adagrad_scale(m[row], g, dim, step, epsilon);
    int16_t* rh = h + row * dim;
    int16_t* rl = o + row * dim;
    for (int64_t d = 0; d < dim; ++d) split(join(rh[d], rl[d]) - scale * g[d], rh[d], rl[d]);
  });
}

// Fused dot interaction: for each sample, the dots of every pair of distinct features
// (feature 0 the bottom-MLP output, 1..T the pooled embeddings), lower triangle in row
// order, after the dense vector: out = [dense, f1.f0, f2.f0, f2.f1, ...]. No (F, F)
// matrix, no gather of its triangle; backward accumulates each pair into both features.
torch::Tensor interaction_forward(torch::Tensor dense, torch::Tensor pooled) {
  TORCH_CHECK(dense.dtype() == torch::kFloat32 && pooled.dtype() == torch::kFloat32, "interaction takes fp32");
  dense = dense.contiguous();
  pooled = pooled.contiguous();
  const int64_t batch = pooled.size(0), tables = pooled.size(1), dim = pooled.size(2), features = tables + 1;
  const int64_t width = dim + features * (features - 1) / 2;
  auto out = torch::empty({batch, width}, torch::kFloat32);
  const float* x = dense.data_ptr<float>();
  const float* e = pooled.data_ptr<float>();
  float* o = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const float* f0 = x + b * dim;
    const float* fe = e + b * tables * dim;  // feature i >= 1 is fe + (i - 1) * dim
    float* row = o + b * width;
    std::memcpy(row, f0, dim * sizeof(float));
    int64_t p = dim;
    for (int64_t i = 1; i < features; ++i) {
      const float* fi = fe + (i - 1) * dim;
      for (int64_t j = 0; j < i; ++j) {
        const float* fj = j == 0 ? f0 : fe + (j - 1) * dim;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)  // lets the compiler reorder the sum into vector lanes
        for (int64_t d = 0; d < dim; ++d) dot += fi[d] * fj[d];
        row[p++] = dot;
      }
    }
  }
  return out;
}

std::vector<torch::Tensor> interaction_backward(torch::Tensor dense, torch::Tensor pooled, torch::Tensor grad) {
  dense = dense.contiguous();
  pooled = pooled.contiguous();
  grad = grad.contiguous();
  const int64_t batch = pooled.size(0), tables = pooled.size(1), dim = pooled.size(2), features = tables + 1;
  const int64_t width = grad.size(1);
  auto grad_dense = torch::empty_like(dense);
  auto grad_pooled = torch::empty_like(pooled);  // zeroed sample by sample below, in cache
  const float* x = dense.data_ptr<float>();
  const float* e = pooled.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* gx = grad_dense.data_ptr<float>();
  float* ge = grad_pooled.data_ptr<float>();
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < batch; ++b) {
    const float* f0 = x + b * dim;
    const float* fe = e + b * tables * dim;
    const float* row = g + b * width;
    float* g0 = gx + b * dim;
    float* gf = ge + b * tables * dim;
    std::memcpy(g0, row, dim * sizeof(float));  // the dense vector passes straight through
    std::fill(gf, gf + tables * dim, 0.0f);
    int64_t p = dim;
    for (int64_t i = 1; i < features; ++i) {
      const float* fi = fe + (i - 1) * dim;
      float* gi = gf + (i - 1) * dim;
      for (int64_t j = 0; j < i; ++j) {
        const float* fj = j == 0 ? f0 : fe + (j - 1) * dim;
        float* gj = j == 0 ? g0 : gf + (j - 1) * dim;
        const float s = row[p++];
        for (int64_t d = 0; d < dim; ++d) {
          gi[d] += s * fj[d];
          gj[d] += s * fi[d];
        }
      }
    }
  }
  return {grad_dense, grad_pooled};
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
  m.def("interaction_forward", &interaction_forward);
  m.def("interaction_backward", &interaction_backward);
}
