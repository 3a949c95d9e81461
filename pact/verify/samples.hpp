#pragma once
/// The op sweep's sample database (as PyTorch's OpInfo): per kernel, view and update op, input geometry,
/// value domain and attributes, chosen to cross the native kernels' vector tails and blocking boundaries.
/// The kernel tests run every provider against the reference on it at every ISA level the CPU runs, and
/// the contracts' generic check `matches_reference_on_samples` runs the same comparison from YAML, so the
/// mutation gate holds a native capsule to exactly the evidence it cites. The sweep fails when an op of
/// the table has no sample.

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "pact/kernels/kernel.hpp"

namespace pact::verify {

struct ResultTamper;

struct SampleInput {
  // wide: normal with scale 4; small: uniform in [-1.2, 1.2) (inside tan's poles); whole: integers in [-2, 2]
  // (ties for comparisons); unique: distinct indices in [0, bound) (index_copy's contract); quantized: i8
  // values in [-127, 127] (linear_int8's weight); bf16_weight: normal values stored as bf16 whatever dtype the
  // test chooses (linear_bf16's weight); tiny: uniform in [1e-4, 2e-3) (where a norm's default eps shows);
  // huge: normal with scale 1e4 (logits far beyond exp's range, where a softmax's max must be exact).
  enum Kind {
    normal,
    positive,
    index,
    mask,
    wide,
    small,
    whole,
    unique,
    quantized,
    bf16_weight,
    tiny,
    huge
  } kind = normal;
  Dims shape;
  DType dtype = DType::f32;  // for normal/positive: the float dtype is chosen by the test
  std::int64_t bound = 0;    // index: values in [0, bound)
};

struct Sample {
  ops::OpTag op;
  std::vector<SampleInput> inputs;
  ops::Attributes attrs;
  bool training = false;
  const char* label = "";
};

/// Short constructors for writing samples (tests build their own cases with them too).
namespace sampling {
using A = ops::Attributes;
using L = std::vector<std::int64_t>;
inline SampleInput N(Dims s) { return {SampleInput::normal, s}; }
inline SampleInput P(Dims s) { return {SampleInput::positive, s}; }
inline SampleInput I(Dims s, std::int64_t bound) { return {SampleInput::index, s, DType::i64, bound}; }
inline SampleInput M(Dims s) { return {SampleInput::mask, s, DType::boolean}; }
inline SampleInput W(Dims s) { return {SampleInput::wide, s}; }  // past the kinks of hardswish at +-3
inline SampleInput S(Dims s) { return {SampleInput::small, s}; }
inline SampleInput Z(Dims s) { return {SampleInput::whole, s}; }
inline SampleInput U(Dims s, std::int64_t bound) { return {SampleInput::unique, s, DType::i64, bound}; }
inline SampleInput Q(Dims s) { return {SampleInput::quantized, s, DType::i8}; }
inline SampleInput B(Dims s) { return {SampleInput::bf16_weight, s, DType::bf16}; }
inline SampleInput T(Dims s) { return {SampleInput::tiny, s}; }
inline SampleInput H(Dims s) { return {SampleInput::huge, s}; }
}  // namespace sampling

/// The samples of the kernel and view ops (inputs in operand order).
std::vector<Sample> samples();
/// Samples past the native kernels' blocking boundaries, or with values too large for finite differences
/// (the provider comparisons run them; the reference sweep's gradient checks do not).
std::vector<Sample> large_samples();
/// The samples of the update ops (role update: they write their role-u operands in place), in operand
/// order; the sweep splits them into state and read operands by the op's roles.
std::vector<Sample> update_samples();

/// What provider comparisons run: samples(), large_samples() and update_samples().
std::vector<Sample> provider_samples();

/// Random values for one sample input in dtype `dtype` (normal/positive) or its own dtype (index, mask).
Tensor make_input(const SampleInput& in, DType dtype, std::mt19937& rng);

/// What the baseline handler made of sample `s`, its inputs drawn in float32 from `rng`, then the cotangent:
/// what every candidate is compared with. Nothing in it depends on a candidate, so one serves several. For
/// a 16-bit `dtype` (a candidate that computes only bf16 or f16) the float32 inputs and the cotangent are
/// rounded to it first, so the baseline sees exactly the values the candidate is given in that dtype.
struct SampleBaseline {
  DType dtype = DType::f32;     ///< the dtype the candidate computes in
  std::string unrepresentable;  ///< why the sample's values do not fit `dtype` (f16's range): not compared
  std::vector<Tensor> inputs;
  std::optional<Tensor> forward;           ///< the baseline's result (an update op: none)
  std::optional<Tensor> cotangent;         ///< random, the forward result's shape and dtype
  bool has_vjp = false;                    ///< whether the baseline has a VJP
  std::vector<std::optional<Tensor>> vjp;  ///< its gradients for `cotangent`
  std::vector<double> state;               ///< an update op: its new state, concatenated
};
SampleBaseline sample_baseline(const kernels::Handler& baseline, const Sample& s, std::mt19937& rng,
                               DType dtype = DType::f32);

/// Every disagreement of `candidate` with the baseline `b` of sample `s`: the forward result, the forward
/// result on strided (transposed-back) copies of the inputs, every VJP input for the cotangent (when the
/// candidate has a VJP), each one wanted alone, an update op's new state; within the op table's tolerances
/// for `b.dtype`, the candidate given its float32 inputs and the cotangent in that dtype. `tamper` alters
/// the candidate's results (a generic mutant). Empty when they agree.
std::vector<std::string> sweep_problems(const kernels::Handler& candidate, const Sample& s, const SampleBaseline& b,
                                        const ResultTamper* tamper = nullptr);
/// The same against `baseline` (the same op's handler) run now, the inputs drawn from `rng`.
std::vector<std::string> sweep_problems(const kernels::Handler& candidate, const kernels::Handler& baseline,
                                        const Sample& s, std::mt19937& rng, const ResultTamper* tamper = nullptr);

/// "op [label]".
std::string describe(const Sample& s);

}  // namespace pact::verify
