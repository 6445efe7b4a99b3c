#include "scheduler/reference_executor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/random.h"
#include "core/status.h"

namespace cavs::scheduler {

namespace {

using vertex::Node;
using vertex::OpKind;
using Row = std::vector<double>;

// Children before parents (iterative post-order DFS from every vertex).
std::vector<int> TopologicalOrder(const Graph& g) {
  const int n = g.num_vertices();
  std::vector<char> done(n, 0);
  std::vector<int> order;
  std::vector<std::pair<int, int>> stack;
  for (int s = 0; s < n; ++s) {
    if (done[s]) continue;
    stack.push_back({s, 0});
    while (!stack.empty()) {
      auto& [v, k] = stack.back();
      if (k < g.num_children(v)) {
        const int c = g.child(v, k++);
        if (c >= 0 && !done[c]) stack.push_back({c, 0});
        continue;
      }
      if (!done[v]) {
        done[v] = 1;
        order.push_back(v);
      }
      stack.pop_back();
    }
  }
  return order;
}

struct Context {
  const vertex::Function& f;
  const Graph& g;
  const ParamValues& params;
  const RunOptions& options;
  int64_t uid_base;                      // batch index of the graph's vertex 0
  std::vector<std::vector<Row>>& fwd;    // [vertex][forward node]
  std::vector<std::vector<Row>>* sgrad;  // [vertex][scatter field]
  const std::vector<Row>* push_grad;     // [vertex]: d loss / d push 0
};

Row ParamRow(const Context& c, const Node& n) { return c.params.at(n.name); }

// Unary and binary element-wise ops shared by the forward and backward programs.
Row Elementwise(const Context& c, const Node& n, int v, const std::vector<const Row*>& in) {
  const Row& a = *in[0];
  Row out(n.width, 0.0);
  switch (n.kind) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul: {
      const Row& b = *in[1];
      for (int64_t j = 0; j < n.width; ++j) {
        out[j] = n.kind == OpKind::kAdd   ? a[j] + b[j]
                 : n.kind == OpKind::kSub ? a[j] - b[j]
                                          : a[j] * b[j];
      }
      return out;
    }
    case OpKind::kSigmoid:
      for (int64_t j = 0; j < n.width; ++j) out[j] = 1 / (1 + std::exp(-a[j]));
      return out;
    case OpKind::kTanh:
      for (int64_t j = 0; j < n.width; ++j) out[j] = std::tanh(a[j]);
      return out;
    case OpKind::kRelu:
      for (int64_t j = 0; j < n.width; ++j) out[j] = std::max(a[j], 0.0);
      return out;
    case OpKind::kNeg:
      for (int64_t j = 0; j < n.width; ++j) out[j] = -a[j];
      return out;
    case OpKind::kScale:
      for (int64_t j = 0; j < n.width; ++j) out[j] = n.scalar * a[j] + n.offset;
      return out;
    case OpKind::kSigmoidGrad:
      for (int64_t j = 0; j < n.width; ++j) out[j] = (*in[1])[j] * a[j] * (1 - a[j]);
      return out;
    case OpKind::kTanhGrad:
      for (int64_t j = 0; j < n.width; ++j) out[j] = (*in[1])[j] * (1 - a[j] * a[j]);
      return out;
    case OpKind::kReluGrad:
      for (int64_t j = 0; j < n.width; ++j) out[j] = a[j] > 0 ? (*in[1])[j] : 0.0;
      return out;
    case OpKind::kConcat: {
      int64_t off = 0;
      for (const Row* r : in) {
        std::copy(r->begin(), r->end(), out.begin() + off);
        off += static_cast<int64_t>(r->size());
      }
      return out;
    }
    case OpKind::kSlice:
      std::copy(a.begin() + n.begin, a.begin() + n.end, out.begin());
      return out;
    case OpKind::kPadSlice:
      std::copy(a.begin(), a.end(), out.begin() + n.begin);
      return out;
    case OpKind::kSum:
      for (double x : a) out[0] += x;
      return out;
    case OpKind::kBroadcastCols:
      std::fill(out.begin(), out.end(), a[0]);
      return out;
    case OpKind::kDropout: {
      if (!c.options.training || n.scalar == 0.0f) return a;
      const uint64_t key = DropoutKey(c.options.dropout_seed, n.index);
      const uint64_t uid = static_cast<uint64_t>(c.uid_base + v);
      for (int64_t j = 0; j < n.width; ++j) {
        const bool keep = core::PhiloxUniform(key, uid * n.width + j) >= n.scalar;
        out[j] = keep ? a[j] / (1.0 - n.scalar) : 0.0;
      }
      return out;
    }
    default:
      CAVS_CHECK(false, "not an element-wise op: ", vertex::OpKindName(n.kind));
  }
  return out;
}

Row MatMul(const Node& n, const Row& x, const Row& w, const core::Shape& ws) {
  Row out(n.width, 0.0);
  const int64_t rows = ws[0], cols = ws[1];
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      if (n.transpose) {
        out[i] += x[j] * w[i * cols + j];
      } else {
        out[j] += x[i] * w[i * cols + j];
      }
    }
  }
  return out;
}

Row GatherReduce(const Context& c, const Node& n, int v, int src_node) {
  Row out(n.width, 0.0);
  int count = 0;
  for (int k = 0; k < c.g.num_children(v); ++k) {
    const int ch = c.g.child(v, k);
    if (ch < 0) continue;
    const Row& r = c.fwd[ch][src_node];
    for (int64_t j = 0; j < n.width; ++j) {
      if (n.reduce == vertex::Reduce::kMax) {
        out[j] = count == 0 ? r[j] : std::max(out[j], r[j]);
      } else {
        out[j] += r[j];
      }
    }
    ++count;
  }
  if (n.reduce == vertex::Reduce::kMean && count > 0) {
    for (double& x : out) x /= count;
  }
  return out;
}

Row EvalForward(const Context& c, int v, int id) {
  const Node& n = c.f.forward().nodes[id];
  const std::vector<Row>& vals = c.fwd[v];
  switch (n.kind) {
    case OpKind::kParam:
      return {};
    case OpKind::kPull: {
      Row out(n.width, 0.0);
      if (c.g.feature_dim == n.width) {
        for (int64_t j = 0; j < n.width; ++j) out[j] = c.g.features[v * n.width + j];
      }
      return out;
    }
    case OpKind::kEmbed: {
      Row out(n.width, 0.0);
      const int t = c.g.tokens.empty() ? -1 : c.g.tokens[v];
      if (t < 0) return out;
      const Row& table = c.params.at(c.f.forward().nodes[n.inputs[0]].name);
      std::copy(table.begin() + t * n.width, table.begin() + (t + 1) * n.width, out.begin());
      return out;
    }
    case OpKind::kGather: {
      const int ch = c.g.child(v, static_cast<int>(n.index));
      const int src = c.f.scatter()[c.f.FieldIndex(n.field)].node;
      return ch < 0 ? Row(n.width, 0.0) : c.fwd[ch][src];
    }
    case OpKind::kGatherReduce:
      return GatherReduce(c, n, v, c.f.scatter()[c.f.FieldIndex(n.field)].node);
    case OpKind::kMatMul: {
      const Node& w = c.f.forward().nodes[n.inputs[1]];
      return MatMul(n, vals[n.inputs[0]], c.params.at(w.name), w.param_shape);
    }
    default: {
      std::vector<Row> param_rows;
      std::vector<const Row*> in;
      param_rows.reserve(n.inputs.size());
      for (int i : n.inputs) {
        const Node& x = c.f.forward().nodes[i];
        if (x.is_static()) {
          param_rows.push_back(ParamRow(c, x));
          in.push_back(&param_rows.back());
        } else {
          in.push_back(&vals[i]);
        }
      }
      return Elementwise(c, n, v, in);
    }
  }
}

}  // namespace

namespace {

void AddInto(std::vector<double>& dst, size_t offset, const Row& src, double scale = 1.0) {
  for (size_t j = 0; j < src.size(); ++j) dst[offset + j] += scale * src[j];
}

// Sends a backward sink's gradient on: to children, parameters or embedding rows.
void ApplySink(const Context& c, const Node& n, int v, const std::vector<Row>& bvals,
               ParamValues& grads) {
  const Row& dy = bvals[n.inputs.back()];
  switch (n.kind) {
    case OpKind::kGatherGrad: {
      const int ch = c.g.child(v, static_cast<int>(n.index));
      if (ch >= 0) AddInto((*c.sgrad)[ch][c.f.FieldIndex(n.field)], 0, dy);
      return;
    }
    case OpKind::kGatherReduceGrad: {
      const int fi = c.f.FieldIndex(n.field);
      std::vector<int> kids;
      for (int k = 0; k < c.g.num_children(v); ++k) {
        if (c.g.child(v, k) >= 0) kids.push_back(c.g.child(v, k));
      }
      if (n.reduce == vertex::Reduce::kMax) {
        const int src = c.f.scatter()[fi].node;
        for (size_t j = 0; j < dy.size(); ++j) {
          int best = -1;
          for (int ch : kids) {
            if (best < 0 || c.fwd[ch][src][j] > c.fwd[best][src][j]) best = ch;
          }
          if (best >= 0) (*c.sgrad)[best][fi][j] += dy[j];
        }
        return;
      }
      const double scale =
          n.reduce == vertex::Reduce::kMean && !kids.empty() ? 1.0 / kids.size() : 1.0;
      for (int ch : kids) AddInto((*c.sgrad)[ch][fi], 0, dy, scale);
      return;
    }
    case OpKind::kWeightGradMatMul: {
      const Row& x = bvals[n.inputs[0]];
      std::vector<double>& dw = grads[n.name];
      for (size_t i = 0; i < x.size(); ++i) {
        for (size_t j = 0; j < dy.size(); ++j) {
          if (n.transpose) {
            dw[j * x.size() + i] += dy[j] * x[i];
          } else {
            dw[i * dy.size() + j] += x[i] * dy[j];
          }
        }
      }
      return;
    }
    case OpKind::kWeightGradBias:
      AddInto(grads[n.name], 0, dy, n.scalar);
      return;
    case OpKind::kWeightGradScale: {
      const Row& x = bvals[n.inputs[0]];
      for (size_t j = 0; j < dy.size(); ++j) grads[n.name][j] += x[j] * dy[j];
      return;
    }
    case OpKind::kEmbedGrad: {
      const int t = c.g.tokens.empty() ? -1 : c.g.tokens[v];
      if (t >= 0) AddInto(grads[n.name], static_cast<size_t>(t) * dy.size(), dy);
      return;
    }
    default:
      CAVS_CHECK(false, "not a sink");
  }
}

void BackwardVertex(const Context& c, int v, ParamValues& grads) {
  const vertex::Program& bp = c.f.backward();
  std::vector<Row> bvals(bp.nodes.size());
  for (int id = 0; id < static_cast<int>(bp.nodes.size()); ++id) {
    const Node& n = bp.nodes[id];
    switch (n.kind) {
      case OpKind::kParam:
        break;
      case OpKind::kForwardValue:
        bvals[id] = c.fwd[v][n.index];
        break;
      case OpKind::kScatterGrad:
        bvals[id] = (*c.sgrad)[v][c.f.FieldIndex(n.field)];
        break;
      case OpKind::kPushGrad:
        bvals[id] = n.index == 0 ? (*c.push_grad)[v] : Row(n.width, 0.0);
        break;
      case OpKind::kMatMul: {
        const Node& w = bp.nodes[n.inputs[1]];
        bvals[id] = MatMul(n, bvals[n.inputs[0]], c.params.at(w.name), w.param_shape);
        break;
      }
      default: {
        if (vertex::IsSink(n.kind)) {
          ApplySink(c, n, v, bvals, grads);
          break;
        }
        std::vector<Row> param_rows;
        std::vector<const Row*> in;
        param_rows.reserve(n.inputs.size());
        for (int i : n.inputs) {
          if (bp.nodes[i].is_static()) {
            param_rows.push_back(c.params.at(bp.nodes[i].name));
            in.push_back(&param_rows.back());
          } else {
            in.push_back(&bvals[i]);
          }
        }
        bvals[id] = Elementwise(c, n, v, in);
      }
    }
  }
}

// Softmax cross-entropy of one row; returns the loss and writes d loss / d logits.
double Xent(const Row& logits, int label, Row* grad) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double z = 0;
  for (double x : logits) z += std::exp(x - mx);
  grad->resize(logits.size());
  for (size_t j = 0; j < logits.size(); ++j) {
    (*grad)[j] = std::exp(logits[j] - mx) / z - (static_cast<int>(j) == label ? 1.0 : 0.0);
  }
  return std::log(z) + mx - logits[label];
}

}  // namespace

ParamValues SnapshotParameters(const vertex::Function& f, const core::ParameterStore& store) {
  ParamValues out;
  for (const vertex::ParamInfo& p : f.params()) {
    const core::Parameter* param = store.Find(p.name);
    CAVS_CHECK(param != nullptr, "parameter '", p.name, "' not created");
    std::vector<float> v = param->value.ToVector();
    out[p.name] = std::vector<double>(v.begin(), v.end());
  }
  return out;
}

absl::StatusOr<ReferenceResult> RunReference(const vertex::Function& f,
                                             const std::vector<Graph>& graphs,
                                             const ParamValues& params, const RunOptions& options) {
  CAVS_RETURN_IF_ERROR(ValidateBatch(f, graphs));
  for (const vertex::ParamInfo& p : f.params()) {
    auto it = params.find(p.name);
    if (it == params.end() || static_cast<int64_t>(it->second.size()) != p.shape.NumElements()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", p.name, "' missing or not of shape ", p.shape.DebugString()));
    }
  }
  ReferenceResult result;
  for (const vertex::ParamInfo& p : f.params())
    result.grads[p.name].assign(p.shape.NumElements(), 0.0);
  const int push0 = f.pushes().empty() ? -1 : f.pushes()[0];
  std::vector<std::vector<std::vector<Row>>> fwd(graphs.size());
  std::vector<std::vector<Row>> logits_grad(graphs.size());
  std::vector<std::vector<int>> orders(graphs.size());
  int64_t uid_base = 0;
  RunResult& run = result.run;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const Graph& g = graphs[gi];
    fwd[gi].assign(g.num_vertices(), std::vector<Row>(f.forward().nodes.size()));
    Context c{f, g, params, options, uid_base, fwd[gi], nullptr, nullptr};
    orders[gi] = TopologicalOrder(g);
    for (int v : orders[gi]) {
      for (int id = 0; id < static_cast<int>(f.forward().nodes.size()); ++id) {
        fwd[gi][v][id] = EvalForward(c, v, id);
      }
    }
    logits_grad[gi].assign(g.num_vertices(), Row());
    run.predictions.emplace_back();
    run.outputs.emplace_back();
    for (int v = 0; v < g.num_vertices() && push0 >= 0; ++v) {
      const Row& logits = fwd[gi][v][push0];
      const int pred =
          static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      run.predictions.back().push_back(pred);
      if (options.keep_outputs)
        run.outputs.back().insert(run.outputs.back().end(), logits.begin(), logits.end());
      const int label = g.labels.empty() ? -1 : g.labels[v];
      if (label < 0) {
        logits_grad[gi][v].assign(logits.size(), 0.0);
        continue;
      }
      run.loss_sum += Xent(logits, label, &logits_grad[gi][v]);
      ++run.labelled;
      run.correct += pred == label;
    }
    run.vertices += g.num_vertices();
    uid_base += g.num_vertices();
  }
  const double scale =
      options.loss == RunOptions::Loss::kMean && run.labelled > 0 ? 1.0 / run.labelled : 1.0;
  result.loss = run.loss_sum * scale;
  if (!options.backward) return result;
  uid_base = 0;
  for (size_t gi = 0; gi < graphs.size(); ++gi) {
    const Graph& g = graphs[gi];
    for (Row& r : logits_grad[gi]) {
      for (double& x : r) x *= scale;
      if (r.empty() && push0 >= 0) r.assign(f.forward().nodes[push0].width, 0.0);
    }
    std::vector<std::vector<Row>> sgrad(g.num_vertices());
    for (auto& fields : sgrad) {
      for (const vertex::ScatterField& sf : f.scatter())
        fields.emplace_back(f.forward().nodes[sf.node].width, 0.0);
    }
    Context c{f, g, params, options, uid_base, fwd[gi], &sgrad, &logits_grad[gi]};
    for (auto it = orders[gi].rbegin(); it != orders[gi].rend(); ++it)
      BackwardVertex(c, *it, result.grads);
    uid_base += g.num_vertices();
  }
  return result;
}

}  // namespace cavs::scheduler
