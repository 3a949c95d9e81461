#pragma once
/// The op oracle (SPEC §10, issue 20): PyTorch's float64 forward values, VJPs and updated state for a
/// fixed set of inputs per op, written by tools/op_oracle.py into contracts/oracle (ops.json, the cases;
/// ops.safetensors, the tensors). Nothing here computes an expected value with Pact's kernels, so a kernel
/// that is deterministic and wrong is refuted.
///
/// The generic contract checks run on these cases, from contract YAML alone (Note [Generic checks] in
/// oracle.cpp): `matches_oracle` (forward, VJP and updated state against PyTorch), `shape_rule` (the op
/// table's shape rule and the kernel's result against PyTorch's shape) and `fd_vjp` (the VJP against
/// central finite differences of the kernel's own forward); `random_mask` holds a dropout-like op to what
/// every mask must satisfy. A generic mutant is a capsule whose results
/// are altered after it ran (ResultTamper), so every generic check is shown able to fail on every op.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pact/core/json.hpp"
#include "pact/core/tensor.hpp"
#include "pact/ir/safetensors.hpp"
#include "pact/kernels/kernel.hpp"
#include "pact/ops/attributes.hpp"
#include "pact/ops/op_table.hpp"

namespace pact::verify {

/// One case of the fixture: the op, its attributes and mode, the inputs, and what PyTorch computed.
struct OracleCase {
  std::string id, label;
  ops::OpTag op{};
  ops::Attributes attrs;
  bool training = false;
  bool half = false;               ///< float inputs and cotangent are 16-bit values (half provider cases)
  bool kinks = false;              ///< inputs sit exactly on the op's kinks (finite differences would straddle them)
  std::vector<Tensor> inputs;      ///< float inputs in f32 (their values are float32 numbers), others as stored
  std::optional<Tensor> out, cot;  ///< forward result and the VJP's cotangent (kernel ops)
  std::map<std::size_t, Tensor> grads;   ///< per input PyTorch differentiates: its gradient (f64)
  std::map<std::size_t, Tensor> states;  ///< update ops: each state operand's new value (f64)
  std::string describe() const;
};

/// The cases `doc` (ops.json) describes, with their tensors from `st` (ops.safetensors): parse_error naming
/// `where` and the case for a missing field or tensor, a wrong type, an unknown op or bad attributes.
std::vector<OracleCase> parse_oracle_cases(const Json& doc, const ir::SafetensorsFile& st, std::string_view where);
/// The default fixture folder beside a contracts folder: `<contracts>/oracle`.
std::string oracle_dir_of(const std::string& contracts_dir);
/// The cases of the fixture in `dir`, read once per folder and kept. A missing or malformed fixture is a
/// typed error (io_error, parse_error) naming the file and the case.
const std::vector<OracleCase>& oracle_cases(const std::string& dir);

/// A generic mutant: a capsule's results altered after its kernel ran. Empty members alter nothing.
struct ResultTamper {
  std::function<void(Tensor&)> forward;                          ///< the forward result
  std::function<void(std::vector<std::optional<Tensor>>&)> vjp;  ///< the gradients, by input
  std::function<void(std::vector<Tensor>&)> state;               ///< an update op's new state operands
};

/// The dtypes a handler is held to the oracle in: `d` for the case's float inputs (the case's integer and
/// boolean inputs stay as stored).
std::vector<Tensor> inputs_in(const OracleCase& c, DType d);

/// Views of owners, in order.
std::vector<TensorView> views_of(const std::vector<Tensor>& ts);

/// Runs an update op's handler on copies of `ins` (operand order, split into state and read by the op's
/// roles) and returns the state operands' new values, in operand order.
std::vector<Tensor> updated_state(const kernels::Handler& h, const std::vector<Tensor>& ins,
                                  const ops::Attributes& attrs);

/// Every disagreement of handler `h` with PyTorch on case `c`, run in dtype `d` (forward value and shape,
/// each VJP input, an update op's new state), within the op table's tolerances (a float64 run: to
/// rounding; f32 and 16-bit: the op's tolerance for that dtype, at least a few float32 ulps). Empty when
/// it agrees.
std::vector<std::string> oracle_problems(const kernels::Handler& h, const OracleCase& c, DType d,
                                         const ResultTamper* tamper = nullptr);

/// The op table's shape rule on the case's input types (in `d`) against PyTorch's output shape, and the
/// kernel's result (shape and dtype) against the rule. Empty when all three agree.
std::vector<std::string> shape_problems(const kernels::Handler& h, const OracleCase& c, DType d,
                                        const ResultTamper* tamper = nullptr);

/// The VJP of `h` against central finite differences of its own forward in dtype `d` (f64 or f32): for a
/// seeded random direction v over the inputs PyTorch differentiates, <g, f(x + h v) - f(x - h v)> against
/// sum_k <vjp_k(g), x+ - x->, where x+ and x- are the perturbed inputs as stored in `d`. Empty when they
/// agree within the stated margin; nullopt when the case has no VJP to check (no cotangent) or its inputs sit
/// on the op's kinks (the oracle marks such cases), where a difference straddles the kink.
std::optional<std::vector<std::string>> fd_vjp_problems(const kernels::Handler& h, const OracleCase& c, DType d,
                                                        std::uint64_t seed, const ResultTamper* tamper = nullptr);

/// `random_mask` (Note [Generic checks]): what holds for every random mask of a dropout-like op (attribute
/// `p`, the probability of dropping), since no two runtimes draw the same one and the oracle cannot compare
/// masks. Run in dtype `d` on 4107 nonzero values for p in {0, 0.2, 0.5, 0.9, 1} and unset (0.5): in training each
/// result is 0 or x / (1 - p), the kept count lies within 5 standard deviations of n (1 - p) (all at p = 0, none at p =
/// 1), the same seed gives the same mask and another seed another, and the VJP is the forward's mask and scale applied
/// to the cotangent; in evaluation the forward and the VJP are the identity. Empty when all hold.
std::vector<std::string> random_mask_problems(const kernels::Handler& h, DType d, std::uint64_t seed,
                                              const ResultTamper* tamper = nullptr);

}  // namespace pact::verify
