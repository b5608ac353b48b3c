// Rescaling a trace to the run's batch, sequence length and accumulation (trace_scaling.h).
#include "traces/format/trace_scaling.h"

#include <cmath>

#include "core/base/errors.h"

namespace zero3 {

namespace {

struct Growth {
  double tokens = 1.0;     // factor of what grows with batch x seq_len
  double quadratic = 1.0;  // factor of what grows with batch x seq_len^2
};

// An amount of bytes with its quadratic part: the linear part grows with tokens, the quadratic part
// with batch x seq_len^2.
void scale_bytes(int64_t& total, int64_t& quadratic, const Growth& growth) {
  const double linear = static_cast<double>(total - quadratic);
  quadratic = std::llround(static_cast<double>(quadratic) * growth.quadratic);
  total = std::llround(linear * growth.tokens) + quadratic;
}

// An amount with its quadratic part, as scale_bytes but in doubles (flops, work).
void scale_amount(double& total, double& quadratic, const Growth& growth) {
  const double linear = total - quadratic;
  quadratic *= growth.quadratic;
  total = linear * growth.tokens + quadratic;
}

// Kernel work: each amount by its parts; the calls stay, a kernel runs once whatever its size.
void scale_work(KernelWork& work, const Growth& growth) {
  scale_amount(work.flops, work.flops_quadratic, growth);
  scale_amount(work.bytes, work.bytes_quadratic, growth);
  scale_amount(work.transcendentals, work.transcendentals_quadratic, growth);
}

void scale_event(TraceEvent& event, const Growth& growth) {
  scale_work(event.forward_work, growth);
  scale_work(event.backward_work, growth);
  if (event.flops >= 0.0) scale_amount(event.flops, event.flops_quadratic, growth);
  scale_bytes(event.activation_bytes, event.activation_quadratic_bytes, growth);
  // One value per token (a [tokens, width] output or input), however long the sequence.
  event.output_bytes = std::llround(static_cast<double>(event.output_bytes) * growth.tokens);
  scale_bytes(event.input_bytes, event.input_quadratic_bytes, growth);
  scale_bytes(event.released_at_backward_begin_bytes, event.released_at_backward_begin_quadratic_bytes, growth);
  scale_bytes(event.forward_transient_bytes, event.forward_transient_quadratic_bytes, growth);
  scale_bytes(event.backward_transient_bytes, event.backward_transient_quadratic_bytes, growth);
}

void scale_amounts(Trace& trace, const Growth& growth) {
  for (TraceStep& step : trace.steps) {
    for (TraceItem& item : step.items) {
      scale_event(item.event, growth);
      for (auto& list : item.per_rank) {
        for (TraceEvent& event : list) scale_event(event, growth);
      }
    }
  }
}

void rescale_tokens(Trace& trace, const RunShape& shape, const std::string& source) {
  const bool asks_batch = shape.batch > 0 && shape.batch != trace.batch;
  const bool asks_seq_len = shape.seq_len > 0 && shape.seq_len != trace.seq_len;
  if (!asks_batch && !asks_seq_len) return;
  if (trace.batch == 0) {
    const std::string asked = asks_batch ? "a micro-batch of " + std::to_string(shape.batch)
                                         : "a sequence length of " + std::to_string(shape.seq_len);
    throw InputError(source + ": at /batch: the trace does not say the batch and sequence length its activations "
                     "and flops were recorded at, so they cannot be rescaled to " + asked + "; add \"batch\" and "
                     "\"seq_len\" (traces/FORMAT.md), or record it with tools/recorders/record_torch_trace.py, which writes them");
  }
  const int64_t batch = shape.batch > 0 ? shape.batch : trace.batch;
  const int64_t seq_len = shape.seq_len > 0 ? shape.seq_len : trace.seq_len;
  if (batch > (int64_t{1} << 50) / seq_len) {
    throw InputError(source + ": a micro-batch of " + std::to_string(batch) + " sequences of " + std::to_string(seq_len) +
                     " tokens exceeds 2^50 tokens per micro-step");
  }
  Growth growth;
  growth.tokens = static_cast<double>(batch * seq_len) / static_cast<double>(trace.tokens);
  growth.quadratic = growth.tokens * static_cast<double>(seq_len) / static_cast<double>(trace.seq_len);
  scale_amounts(trace, growth);
  trace.batch = batch;
  trace.seq_len = seq_len;
  trace.tokens = batch * seq_len;
}

// Repeats a one-micro-step step's forward and backward `micro_steps` times before its optimizer step.
void accumulate(Trace& trace, int64_t micro_steps, const std::string& source) {
  for (size_t i = 0; i < trace.steps.size(); ++i) {
    TraceStep& step = trace.steps[i];
    const int64_t recorded = micro_steps_of(step);
    if (recorded == micro_steps) continue;
    if (recorded != 1) {
      throw InputError(source + ": at /steps/" + std::to_string(i) + ": the step was recorded with " +
                       std::to_string(recorded) + " micro-steps (gradient accumulation " + std::to_string(recorded) +
                       "), so it cannot be replayed with " + std::to_string(micro_steps) +
                       "; leave gradient_accumulation_steps (--gas) unset or at " + std::to_string(recorded));
    }
    if (!step.items.back().per_rank.empty()) {
      throw InputError(source + ": at /steps/" + std::to_string(i) + ": a step that ends inside a per-rank group "
                       "cannot be repeated for gradient accumulation");
    }
    const std::vector<TraceItem> micro_step(step.items.begin(), step.items.end() - 1);  // all but optimizer_step
    std::vector<TraceItem> items;
    items.reserve(micro_step.size() * static_cast<size_t>(micro_steps) + 1);
    for (int64_t k = 0; k < micro_steps; ++k) items.insert(items.end(), micro_step.begin(), micro_step.end());
    items.push_back(step.items.back());
    step.items = std::move(items);
  }
}

}  // namespace

int64_t micro_steps_of(const TraceStep& step) {
  int64_t count = 0;
  for (const TraceEvent& event : events_for(step, 0)) count += event.kind == EventKind::backward ? 1 : 0;
  return count;
}

Trace rescale_trace(const Trace& trace, const RunShape& shape, const std::string& source) {
  // Replay walks every micro-step; past a few thousand the prediction only gets slower.
  constexpr int64_t kMicroStepsMax = 4096;
  if (shape.micro_steps > kMicroStepsMax) {
    throw InputError(source + ": gradient accumulation of " + std::to_string(shape.micro_steps) +
                     " micro-steps per step: replay simulates each one, at most " + std::to_string(kMicroStepsMax));
  }
  Trace out = trace;
  rescale_tokens(out, shape, source);
  if (shape.micro_steps > 0) accumulate(out, shape.micro_steps, source);
  return out;
}

}  // namespace zero3
