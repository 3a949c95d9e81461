#include <fmt/format.h>

#include <numeric>
#include <vector>

#include "pact/core/core.hpp"
#include "pact/core/file.hpp"
#include "tools/pact/command.hpp"
#include "tools/pact/commands.hpp"

namespace pact::cli {

int run_demo() {
  AccountingRecorder ledger;
  fmt::print("pact storage demo (pact train arrives with the runtime; see README)\n\n");

  // An owner and its views.
  std::vector<float> values(12);
  std::iota(values.begin(), values.end(), 0.0f);
  Tensor a = Tensor::from_values<float>(Dims{3, 4}, values);
  fmt::print("owner      {}  contiguous={}  allocation {}\n", a.to_string(), a.is_contiguous(),
             a.span_identity().allocation_id);

  {
    TensorView t = a.transpose(0, 1);
    fmt::print("transpose  {}  strides {}  contiguous={}\n", t.to_string(), t.strides().to_string(), t.is_contiguous());
    auto prepared = std::move(t).prepare_host<float>();  // holds the shared borrow until the scope ends
    std::visit(
        [&](auto& p) {
          if constexpr (requires { p.cursor(); }) {
            fmt::print("           strided cursor:");
            auto c = p.cursor();
            while (const float* v = c.next()) fmt::print(" {}", *v);
            fmt::print("\n");
          }
        },
        prepared.value());
  }

  // A mutable view, then a duplicate and a transfer: the ledgers show copies only where bytes moved.
  a.as_view_mut().slice_mut(0, 1, 2).fill(-1.0);
  Tensor b = a.duplicate();
  Tensor c = a.transfer_to(cuda_provider());
  fmt::print("duplicate  {}   transfer {}\n", b.to_string(), c.to_string());
  {
    auto host = c.prepare_host<float>();
    fmt::print("host access to {} -> {}\n", c.provider_name(),
               host.has_value() ? "granted" : host.error().error.what());
  }

  // A group: one allocation, two logical values, split into disjoint mutable views.
  Storage storage = Storage::allocate(cpu_provider(), 64, AllocationReason::OperationOutput);
  DescriptorSpec specs[] = {{AllocationSlot{0}, LayoutRequest::contiguous(DType::f32, Dims{8})},
                            {AllocationSlot{0}, LayoutRequest::contiguous(DType::f32, Dims{8}, 32)}};
  std::vector<Storage> owners;
  owners.push_back(std::move(storage));
  auto group = AllocationGroup::make(std::move(owners), specs);
  DescriptorSlot slots[] = {group->slot(0), group->slot(1)};
  {
    auto halves = group->split_mut(slots);
    halves[0].fill(1.0);
    halves[1].fill(2.0);
  }
  fmt::print("group      2 descriptors over allocation {} -> [{}, {}]\n",
             group->view(slots[0]).span_identity().allocation_id, group->view(slots[0]).get(Dims{0}).real,
             group->view(slots[1]).get(Dims{0}).real);
  DescriptorSlot overlapping[] = {group->slot(0), group->slot(0)};
  try {
    group->split_mut(overlapping);
  } catch (const Error& e) {
    fmt::print("split_mut of one slot twice -> {}\n", error_code_name(e.code()));
  }

  fmt::print("\nledger     allocations:");
  for (auto [reason, n] : ledger.allocation_multiset()) fmt::print(" {}x{}", allocation_reason_name(reason), n);
  fmt::print("\n           copies:");
  for (auto [reason, n] : ledger.copy_multiset()) fmt::print(" {}x{}", copy_reason_name(reason), n);
  fmt::print("\n");
  return 0;
}

int run_digest(const std::string& path, const std::string& domain) {
  Json value = parse_json(read_file(path, "digest"), path);
  fmt::print("{}\n", digest_json(domain, value));
  return 0;
}

namespace {

const bool demo_registered = register_command("demo", [](CLI::App& app) {
  auto* demo = app.add_subcommand("demo", "tour the storage model: owners, views, groups, ledgers");
  return std::vector<Runner>{{demo, [] { return run_demo(); }}};
});

struct DigestArgs {
  std::string path, domain = "pact.json.v1";
};
const bool digest_registered = register_command("digest", [](CLI::App& app) {
  auto a = std::make_shared<DigestArgs>();
  auto* digest = app.add_subcommand("digest", "print the canonical-JSON SHA-256 digest of a JSON file");
  digest->add_option("file", a->path, "JSON file")->required();
  digest->add_option("--domain", a->domain, "digest domain (domain-separates digests)");
  return std::vector<Runner>{{digest, [a] { return run_digest(a->path, a->domain); }}};
});

}  // namespace

}  // namespace pact::cli
