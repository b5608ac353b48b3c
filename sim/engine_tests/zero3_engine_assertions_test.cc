// The engine checks itself: each call out of the phase order, and each broken step-boundary or
// bucket invariant, is a CorrectnessError naming the call or the invariant, the phase, the rank and
// the step. Illegal sequences are driven through the public phase API and module hooks where one
// exists; EngineInvariantProbe reaches the states no public sequence gets to (a stale gather, a
// miscounted live total, a parameter holding what its status says it must not), to show those
// checks fire too.
#include <gtest/gtest.h>

#include <functional>

#include "core/autograd/autograd.h"
#include "core/autograd/ops.h"
#include "core/base/errors.h"
#include "core/models/model_zoo.h"
#include "core/zero3/zero3_engine.h"
#include "core/zero3/zero3_engine_state.h"
#include "sim/sim_world.h"

namespace zero3 {

// Friend of Zero3Engine: the narrow way into its private state, for this file only.
struct EngineInvariantProbe {
  static Zero3Engine::ParamState& state(Zero3Engine& engine, const Parameter& param) {
    return *engine.states_[static_cast<size_t>(param.id())];
  }
  static void queue_for_reduction(Zero3Engine& engine, const Parameter& param) {
    engine.reduce_bucket_.push_back(&state(engine, param));
  }
  static void flush_reduce_bucket(Zero3Engine& engine, Context& ctx) { engine.flush_reduce_bucket(ctx); }
  static void issue_gather(Zero3Engine& engine, Module& module, const Parameter& param) {
    engine.issue_gather(module, {&state(engine, param)});
  }
  // Completes a gather the engine never issued (as a second completion of one would be).
  static void complete_stale_gather(Zero3Engine& engine, Context& ctx, const Parameter& param) {
    Zero3Engine::PendingGather stale{
        BucketLayout({{.param_id = param.id(), .numel = param.numel()}}, 1), {&state(engine, param)}, {}, {}, {}};
    engine.complete_gather(ctx, stale);
  }
  static void check_micro_step_boundary(Zero3Engine& engine, Context& ctx) { engine.check_micro_step_boundary(ctx); }
  static void miscount_live_elements(Zero3Engine& engine, int64_t elements) {
    engine.totals_.live_elements += elements;
  }
  // The running totals by status, to miscount them.
  static StatusTotals& totals(Zero3Engine& engine) { return engine.totals_; }
  // Completes the oldest gather in flight, as waiting for one of its parameters would.
  static void complete_oldest_gather(Zero3Engine& engine, Context& ctx) {
    engine.complete_gather(ctx, *engine.pending_.front());
  }
  // A status change that leaves `full` and `gather` as given, as a caller getting them wrong would.
  static void move_status(Zero3Engine& engine, const Parameter& param, ParamStatus to, Tensor full,
                          Zero3Engine::PendingGather* gather) {
    engine.move_status(state(engine, param), to, "probe", std::move(full), gather);
  }
};

namespace {

// Three modules: layers.0 (weight id 0 [2,3], bias id 1), layers.1 (weight id 2 [3,2]), layers.2
// (scale id 3 [3]).
const nlohmann::json kTinySpec = {{"zero3_model_spec", 1},
                                  {"kind", "sequential"},
                                  {"input_width", 3},
                                  {"loss", "mse"},
                                  {"layers",
                                   {{{"type", "linear"}, {"out", 2}},
                                    {{"type", "linear"}, {"out", 3}, {"bias", false}},
                                    {{"type", "scale"}, {"shape", {3}}}}}};

// Nothing persistent, nothing kept for reuse, no prefetch: every gather and release is explicit.
TrainConfig sharded_config() {
  TrainConfig config;
  config.zero.persistence_threshold = 0;
  config.zero.max_reuse_distance = 0;
  config.zero.max_live_elements = 0;
  config.zero.overlap_comm = false;
  return config;
}

// The tiny model under an engine on one simulated rank.
struct Rig {
  explicit Rig(SimRank& sim, const TrainConfig& config = sharded_config(), BugInjections bugs = {})
      : built(build_model_from_spec(kTinySpec, "tiny", {.seed = 5})),
        engine(initialized(built), sim.comm(), sim.allocator(), sim.kernels(), config, bugs),
        ctx(sim.kernels(), &engine, sim.rank()) {}
  static Model& initialized(BuiltModel& model) {
    model.model->initialize(5);
    return *model.model;
  }
  Module& layer(int index) { return *find(built.model->root(), "layers." + std::to_string(index)); }
  static Module* find(Module& module, const std::string& name) {
    if (module.name() == name) return &module;
    for (const auto& child : module.children()) {
      if (Module* found = find(*child, name)) return found;
    }
    return nullptr;
  }
  Parameter& param(int id) { return *built.model->parameters()[static_cast<size_t>(id)]; }
  // A module's forward that uses `param_id`: its loss term is the sum of the value.
  Var run(int layer_index, int param_id) {
    Module& module = layer(layer_index);
    const int64_t invocation = ctx.enter_module(module);
    Var term = sum(ctx, ctx.param(module, param(param_id)));
    ctx.exit_module(module, invocation);
    return term;
  }
  void open_micro_step() {
    engine.begin_step(ctx, 0);
    engine.begin_micro_step(ctx);
  }

  BuiltModel built;
  Zero3Engine engine;
  Context ctx;
};

// The message of the CorrectnessError `body` raised on rank 0, or why there is none.
std::string correctness_error(const std::function<void(Rig&)>& body, const TrainConfig& config = sharded_config(),
                              BugInjections bugs = {}) {
  std::string message = "no error";
  SimWorld world({.world = 1, .seed = 1, .fiber_stack_bytes = 1 << 20});
  const SimResult result = world.run([&](SimRank& sim) {
    Rig rig(sim, config, bugs);
    try {
      body(rig);
    } catch (const CorrectnessError& error) {
      message = error.what();
    } catch (const std::exception& error) {
      message = std::string("not a CorrectnessError: ") + error.what();
    }
  });
  EXPECT_TRUE(result.all_ok()) << result.summary();
  return message;
}

// Expects `body` to raise a CorrectnessError on rank 0 whose message holds `expected`.
void expect_correctness_error(const std::string& expected, const std::function<void(Rig&)>& body,
                              const TrainConfig& config = sharded_config(), BugInjections bugs = {}) {
  EXPECT_PRED_FORMAT2(testing::IsSubstring, expected, correctness_error(body, config, bugs));
}

// ---- the phase order ----------------------------------------------------------------------------

TEST(EnginePhaseOrder, LegalDriverSequencesRaiseNothing) {
  TrainConfig accumulating = sharded_config();
  accumulating.gradient_accumulation_steps = 2;
  EXPECT_EQ(correctness_error(
                [](Rig& rig) {
                  // Gradient accumulation over two micro-steps, the loss recorded after backward began.
                  rig.engine.begin_step(rig.ctx, 0);
                  for (int micro = 0; micro < 2; ++micro) {
                    rig.engine.begin_micro_step(rig.ctx);
                    Var loss = rig.run(1, 2);
                    rig.engine.begin_backward();
                    rig.engine.record_micro_loss(rig.ctx, loss.value());
                    backward(rig.ctx, loss);
                    rig.engine.end_micro_step(rig.ctx);
                  }
                  rig.engine.end_step(rig.ctx);
                  // A checkpoint loaded between steps, then a step that records no loss, then one with
                  // no micro-step at all, then the full state.
                  rig.engine.load_shard_state(rig.ctx, rig.engine.shard_state());
                  rig.engine.begin_step(rig.ctx, 1);
                  rig.engine.begin_micro_step(rig.ctx);
                  Var loss = rig.run(0, 0);
                  rig.engine.begin_backward();
                  backward(rig.ctx, loss);
                  rig.engine.end_micro_step(rig.ctx);
                  rig.engine.end_step(rig.ctx);
                  rig.engine.begin_step(rig.ctx, 2);
                  rig.engine.end_step(rig.ctx);
                  rig.engine.gather_full_state(3);
                  EXPECT_EQ(rig.engine.phase(), EnginePhase::between_steps);
                },
                accumulating),
            "no error");
}

TEST(EnginePhaseOrder, BeginStepTwiceNamesTheCallThePhaseTheRankAndTheStep) {
  expect_correctness_error("illegal engine call begin_step() in phase IN_STEP on rank 0 at step 4", [](Rig& rig) {
    rig.engine.begin_step(rig.ctx, 4);
    rig.engine.begin_step(rig.ctx, 5);
  });
}

TEST(EnginePhaseOrder, AMicroStepOutsideAStepIsAnError) {
  expect_correctness_error("illegal engine call begin_micro_step() in phase BETWEEN_STEPS",
                           [](Rig& rig) { rig.engine.begin_micro_step(rig.ctx); });
}

TEST(EnginePhaseOrder, EndingAMicroStepWhoseBackwardNeverBeganIsAnError) {
  expect_correctness_error("illegal engine call end_micro_step() in phase FORWARD", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.end_micro_step(rig.ctx);
  });
}

TEST(EnginePhaseOrder, BeginningBackwardTwiceIsAnError) {
  expect_correctness_error("illegal engine call begin_backward() in phase BACKWARD", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.begin_backward();
    rig.engine.begin_backward();
  });
}

TEST(EnginePhaseOrder, EndingTheStepInsideAMicroStepIsAnError) {
  expect_correctness_error("illegal engine call end_step() in phase BACKWARD", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.begin_backward();
    rig.engine.end_step(rig.ctx);
  });
}

TEST(EnginePhaseOrder, RecordingALossBetweenMicroStepsIsAnError) {
  expect_correctness_error("illegal engine call record_micro_loss() in phase IN_STEP", [](Rig& rig) {
    rig.engine.begin_step(rig.ctx, 0);
    rig.engine.record_micro_loss(rig.ctx, Tensor::scalar(1.0f));
  });
}

TEST(EnginePhaseOrder, CheckpointCallsInsideAStepAreErrors) {
  expect_correctness_error("illegal engine call load_shard_state() in phase IN_STEP", [](Rig& rig) {
    rig.engine.begin_step(rig.ctx, 0);
    rig.engine.load_shard_state(rig.ctx, rig.engine.shard_state());
  });
  expect_correctness_error("illegal engine call gather_full_state() in phase FORWARD", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.gather_full_state(0);
  });
}

TEST(EnginePhaseOrder, AModuleRunningOutsideAMicroStepIsAnError) {
  expect_correctness_error("illegal engine call pre_forward() in phase BETWEEN_STEPS", [](Rig& rig) { rig.run(0, 0); });
  expect_correctness_error("illegal engine call pre_backward() in phase FORWARD", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.pre_backward(rig.ctx, rig.layer(0));
  });
  expect_correctness_error("illegal engine call checked_access() in phase IN_STEP", [](Rig& rig) {
    rig.engine.begin_step(rig.ctx, 0);
    rig.engine.checked_access(rig.ctx, rig.layer(0), rig.param(0));
  });
}

// ---- hooks and the micro-step boundary ----------------------------------------------------------

TEST(EngineInvariants, AModuleEndingThatIsNotTheInnermostRunningIsAnError) {
  expect_correctness_error("module 'layers.0' ended but no module is the innermost running", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.post_forward(rig.ctx, rig.layer(0));
  });
}

TEST(EngineInvariants, ActiveUsesNeverGoBelowZero) {
  // layers.1 entered twice (nested), then it registers an external parameter, counted once for
  // the one running invocation the engine assumes: the second end has no use of it left to end.
  expect_correctness_error("'layers.0.weight' has no active use left for module 'layers.1' to end", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.pre_forward(rig.ctx, rig.layer(1));
    rig.engine.pre_forward(rig.ctx, rig.layer(1));
    rig.engine.checked_access(rig.ctx, rig.layer(1), rig.param(0));
    rig.engine.post_forward(rig.ctx, rig.layer(1));
    rig.engine.post_forward(rig.ctx, rig.layer(1));
  });
}

TEST(EngineInvariants, AModuleStillRunningAtTheEndOfAMicroStepIsAnError) {
  expect_correctness_error("in phase IN_STEP: module 'layers.0' still running at the end of the micro-step",
                           [](Rig& rig) {
                             rig.open_micro_step();
                             rig.ctx.enter_module(rig.layer(0));
                             rig.engine.begin_backward();
                             rig.engine.end_micro_step(rig.ctx);
                           });
}

TEST(EngineInvariants, AnActiveUseLeftAtTheEndOfAMicroStepIsAnError) {
  // An access by a module that is not running counts a use that no module end takes back.
  expect_correctness_error("'layers.0.weight' has 1 active uses at the end of the micro-step", [](Rig& rig) {
    rig.open_micro_step();
    rig.engine.checked_access(rig.ctx, rig.layer(1), rig.param(0));
    rig.engine.begin_backward();
    rig.engine.end_micro_step(rig.ctx);
  });
}

TEST(EngineInvariants, AGradientNeverReduceScatteredIsAnErrorAtTheMicroStepEnd) {
  // With bucket-exact-size-skipped, a bucket of exactly reduce_bucket_size is dropped unreduced:
  // layers.1's weight (6 elements) fills it alone.
  TrainConfig config = sharded_config();
  config.zero.reduce_bucket_elements = 6;
  BugInjections bugs;
  bugs.set(Bug::bucket_exact_size_skipped);
  expect_correctness_error(
      "on rank 0 at step 0 in phase IN_STEP: the full gradient of 'layers.1.weight' was never "
      "reduce-scattered",
      [](Rig& rig) {
        rig.open_micro_step();
        Var loss = rig.run(1, 2);
        rig.engine.begin_backward();
        backward(rig.ctx, loss);
        rig.engine.end_micro_step(rig.ctx);
      },
      config, bugs);
}

TEST(EngineInvariants, AGatherInFlightAtAStepBoundaryIsAnError) {
  expect_correctness_error("1 gathers (6 elements) still in flight at a step boundary", [](Rig& rig) {
    rig.open_micro_step();
    EngineInvariantProbe::issue_gather(rig.engine, rig.layer(1), rig.param(2));
    EngineInvariantProbe::check_micro_step_boundary(rig.engine, rig.ctx);
  });
}

TEST(EngineInvariants, AReduceBucketLeftFullAtTheMicroStepEndIsAnError) {
  expect_correctness_error("1 parameters left in the reduce bucket", [](Rig& rig) {
    rig.open_micro_step();
    EngineInvariantProbe::queue_for_reduction(rig.engine, rig.param(3));
    EngineInvariantProbe::check_micro_step_boundary(rig.engine, rig.ctx);
  });
}

TEST(EngineInvariants, LiveElementsDifferentFromTheAvailableParametersAreAnErrorAtTheStepEnd) {
  expect_correctness_error(
      "at step 2 in phase STEP: live elements 5 differ from the 0 elements of AVAILABLE parameters", [](Rig& rig) {
        rig.engine.begin_step(rig.ctx, 2);
        EngineInvariantProbe::miscount_live_elements(rig.engine, 5);
        rig.engine.end_step(rig.ctx);
      });
}

// ---- both sides of each status change -------------------------------------------------------------
// Before a change a parameter must hold what its status says, after it what its new status says:
// its full tensor exactly while AVAILABLE, a gather exactly while INFLIGHT, and the running totals
// must count it there. The error names the side, the change, the parameter, the module, the rank,
// the step and the phase. layers.1's weight (id 2, 6 elements) is the one moved.

TEST(EngineStatusChanges, ReleasingAParameterWhoseFullTensorIsGoneIsAnErrorNamingIt) {
  expect_correctness_error(
      "on rank 0 at step 0 in phase FORWARD: before AVAILABLE -> NOT_AVAILABLE of 'layers.1.weight' in module "
      "'layers.1': it has no full tensor while AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        rig.engine.pre_forward(rig.ctx, rig.layer(1));
        EngineInvariantProbe::state(rig.engine, rig.param(2)).full = Tensor();
        rig.engine.post_forward(rig.ctx, rig.layer(1));
      });
}

TEST(EngineStatusChanges, GatheringAParameterThatStillHoldsAFullTensorIsAnErrorNamingIt) {
  expect_correctness_error(
      "before NOT_AVAILABLE -> INFLIGHT of 'layers.1.weight' in module 'layers.1': it still holds a full tensor "
      "while NOT_AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        EngineInvariantProbe::state(rig.engine, rig.param(2)).full = Tensor::zeros({3, 2});
        rig.engine.pre_forward(rig.ctx, rig.layer(1));
      });
}

TEST(EngineStatusChanges, GatheringAParameterThatStillPointsAtAGatherIsAnErrorNamingIt) {
  expect_correctness_error(
      "before NOT_AVAILABLE -> INFLIGHT of 'layers.2.scale' in module 'layers.2': it still points at a gather "
      "while NOT_AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        EngineInvariantProbe::issue_gather(rig.engine, rig.layer(1), rig.param(2));
        EngineInvariantProbe::state(rig.engine, rig.param(3)).pending =
            EngineInvariantProbe::state(rig.engine, rig.param(2)).pending;
        rig.engine.pre_forward(rig.ctx, rig.layer(2));
      });
}

TEST(EngineStatusChanges, CompletingTheGatherOfAParameterThatPointsAtNoGatherIsAnErrorNamingIt) {
  expect_correctness_error(
      "before INFLIGHT -> AVAILABLE of 'layers.1.weight' in module '<gather>': it points at no gather while INFLIGHT",
      [](Rig& rig) {
        rig.open_micro_step();
        EngineInvariantProbe::issue_gather(rig.engine, rig.layer(1), rig.param(2));
        EngineInvariantProbe::state(rig.engine, rig.param(2)).pending = nullptr;
        EngineInvariantProbe::complete_oldest_gather(rig.engine, rig.ctx);
      });
}

TEST(EngineStatusChanges, ReleasingAParameterTheLiveTotalsDoNotCountIsAnErrorNamingIt) {
  // Released, it would take the live elements below zero.
  expect_correctness_error(
      "before AVAILABLE -> NOT_AVAILABLE of 'layers.1.weight' in module 'layers.1': live totals 1 parameters, 0 "
      "elements: they do not count this parameter's 6 elements while AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        rig.engine.pre_forward(rig.ctx, rig.layer(1));
        EngineInvariantProbe::miscount_live_elements(rig.engine, -6);
        rig.engine.post_forward(rig.ctx, rig.layer(1));
      });
}

TEST(EngineStatusChanges, CompletingAGatherTheInFlightTotalsDoNotCountIsAnErrorNamingIt) {
  expect_correctness_error(
      "before INFLIGHT -> AVAILABLE of 'layers.1.weight' in module '<gather>': in-flight totals 0 parameters, 6 "
      "elements: elements with no parameter while INFLIGHT",
      [](Rig& rig) {
        rig.open_micro_step();
        EngineInvariantProbe::issue_gather(rig.engine, rig.layer(1), rig.param(2));
        EngineInvariantProbe::totals(rig.engine).inflight_params -= 1;
        EngineInvariantProbe::complete_oldest_gather(rig.engine, rig.ctx);
      });
}

TEST(EngineStatusChanges, ReleasingTheLastAvailableParameterMustLeaveNoLiveElementsOrItIsAnError) {
  // Five live elements too many: the release itself is counted, but leaves elements with no parameter.
  expect_correctness_error(
      "after AVAILABLE -> NOT_AVAILABLE of 'layers.1.weight' in module 'layers.1': live totals 0 parameters, 5 "
      "elements: elements with no parameter while NOT_AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        rig.engine.pre_forward(rig.ctx, rig.layer(1));
        EngineInvariantProbe::miscount_live_elements(rig.engine, 5);
        rig.engine.post_forward(rig.ctx, rig.layer(1));
      });
}

TEST(EngineStatusChanges, BecomingAvailableWithoutAFullTensorIsAnErrorNamingIt) {
  expect_correctness_error(
      "after INFLIGHT -> AVAILABLE of 'layers.1.weight' in module 'probe': it has no full tensor while AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        EngineInvariantProbe::issue_gather(rig.engine, rig.layer(1), rig.param(2));
        EngineInvariantProbe::move_status(rig.engine, rig.param(2), ParamStatus::available, Tensor(), nullptr);
      });
}

TEST(EngineStatusChanges, BeingReleasedWhileKeepingTheFullTensorIsAnErrorNamingIt) {
  expect_correctness_error(
      "after AVAILABLE -> NOT_AVAILABLE of 'layers.1.weight' in module 'probe': it still holds a full tensor while "
      "NOT_AVAILABLE",
      [](Rig& rig) {
        rig.open_micro_step();
        rig.engine.pre_forward(rig.ctx, rig.layer(1));
        EngineInvariantProbe::move_status(rig.engine, rig.param(2), ParamStatus::not_available,
                                          Tensor::zeros({3, 2}), nullptr);
      });
}

TEST(EngineStatusChanges, GoingInFlightWithoutAGatherIsAnErrorNamingIt) {
  expect_correctness_error(
      "after NOT_AVAILABLE -> INFLIGHT of 'layers.1.weight' in module 'probe': it points at no gather while INFLIGHT",
      [](Rig& rig) {
        rig.open_micro_step();
        EngineInvariantProbe::move_status(rig.engine, rig.param(2), ParamStatus::inflight, Tensor(), nullptr);
      });
}

// The step boundary recounts what the changes kept as running totals.
TEST(EngineStatusChanges, ParametersCountedInFlightAtAStepBoundaryAreAnError) {
  expect_correctness_error("at step 2 in phase STEP: 1 parameters counted in flight at a step boundary", [](Rig& rig) {
    rig.engine.begin_step(rig.ctx, 2);
    EngineInvariantProbe::totals(rig.engine).inflight_params += 1;
    rig.engine.end_step(rig.ctx);
  });
}

TEST(EngineStatusChanges, AvailableParametersMiscountedAreAnErrorAtTheStepEnd) {
  expect_correctness_error("at step 2 in phase STEP: 1 parameters counted AVAILABLE, 0 are", [](Rig& rig) {
    rig.engine.begin_step(rig.ctx, 2);
    EngineInvariantProbe::totals(rig.engine).available_params += 1;
    rig.engine.end_step(rig.ctx);
  });
}

// ---- buckets ------------------------------------------------------------------------------------

TEST(EngineInvariants, AGatherBucketInArrivalOrderIsAnError) {
  // layers.1 registers layers.0's weight (id 0) as external; entered again, it lists its own
  // weight (id 2) first. By id, the bucket is [0, 2]; in arrival order [2, 0].
  const auto reuse_an_external = [](Rig& rig) {
    rig.open_micro_step();
    rig.run(1, 0);
    rig.run(1, 2);
  };
  EXPECT_EQ(correctness_error(reuse_an_external), "no error");
  BugInjections bugs;
  bugs.set(Bug::gather_order_by_arrival);
  expect_correctness_error(
      "gather bucket of module 'layers.1' lists 'layers.0.weight' (id 0) after 'layers.1.weight' "
      "(id 2): buckets are ordered by id",
      reuse_an_external, sharded_config(), bugs);
}

TEST(EngineInvariants, AParameterReducedTwiceInAMicroStepIsAnError) {
  expect_correctness_error("'layers.2.scale' queued for reduction after it was reduced", [](Rig& rig) {
    rig.open_micro_step();
    EngineInvariantProbe::state(rig.engine, rig.param(3)).reduced = true;
    EngineInvariantProbe::queue_for_reduction(rig.engine, rig.param(3));
    EngineInvariantProbe::flush_reduce_bucket(rig.engine, rig.ctx);
  });
  expect_correctness_error("'layers.0.bias' queued twice in one reduce bucket", [](Rig& rig) {
    rig.open_micro_step();
    EngineInvariantProbe::queue_for_reduction(rig.engine, rig.param(1));
    EngineInvariantProbe::queue_for_reduction(rig.engine, rig.param(1));
    EngineInvariantProbe::flush_reduce_bucket(rig.engine, rig.ctx);
  });
}

TEST(EngineInvariants, CompletingAGatherThatIsNotInFlightIsAnError) {
  expect_correctness_error("a gather of 1 parameters from 'layers.1.weight' completed that is not in flight",
                           [](Rig& rig) {
                             rig.open_micro_step();
                             EngineInvariantProbe::complete_stale_gather(rig.engine, rig.ctx, rig.param(2));
                           });
}

}  // namespace
}  // namespace zero3
